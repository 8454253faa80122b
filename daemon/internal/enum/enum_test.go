package enum

import (
	"testing"

	"github.com/stretchr/testify/require"
)

type color string

func TestSentenceSaysTheListAsAMessageDoes(t *testing.T) {
	require.Equal(t, "", Sentence([]color{}, "or"))
	require.Equal(t, "red", Sentence([]color{"red"}, "or"))
	require.Equal(t, "red or blue", Sentence([]color{"red", "blue"}, "or"))
	require.Equal(t, "red, green and blue", Sentence([]color{"red", "green", "blue"}, "and"))
}

func TestValuesKeepTheDeclaredOrder(t *testing.T) {
	vs := []Value[color]{{"red", "warm"}, {"blue", "cold"}}
	require.Equal(t, []color{"red", "blue"}, Values(vs))
	require.Equal(t, []string{"red", "blue"}, Strings(Values(vs)))
}
