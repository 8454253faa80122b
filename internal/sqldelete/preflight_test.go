package sqldelete

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/sdk"
)

func TestInboundKeysCountOnlyWhatCanBeLeftBehind(t *testing.T) {
	var counted []string
	k := InboundKeys[string]{
		Inbound:      []string{"aligned", "aligned-but-stripping", "clean", "dirty"},
		Dropped:      []string{"aligned-but-stripping"},
		StripsTenant: func(e string) bool { return e == "aligned-but-stripping" },
		Aligned:      func(e string) bool { return e == "aligned" || e == "aligned-but-stripping" },
		Count: func(e string, stripping bool) (int64, error) {
			counted = append(counted, e)
			if e == "clean" {
				return 0, nil
			}
			return 3, nil
		},
		Describe: func(e string, n int64, stripping bool) string {
			if stripping {
				return e + " strips"
			}
			return e
		},
	}
	problems, err := k.Problems()
	require.NoError(t, err)
	require.Equal(t, []string{"aligned-but-stripping", "clean", "dirty"}, counted, "an aligned key is counted only when its SET NULL strips the tenant")
	require.Equal(t, []string{"aligned-but-stripping strips", "dirty"}, problems)

	k.Count = func(string, bool) (int64, error) { return 0, errors.New("connection reset") }
	_, err = k.Problems()
	require.EqualError(t, err, "connection reset")
}

func TestRefusedIsPermanentAndNamesEveryProblem(t *testing.T) {
	require.NoError(t, Refused(nil))
	err := Refused([]string{"a", "b"})
	var e *sdk.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, sdk.ClassPermanent, e.Class)
	require.EqualError(t, err, "erasure refused before deleting anything: a; b")
}
