package fkgraph

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func alpha(a, b string) bool { return a < b }

// sakila is the shape of Sakila's keys: address -> city -> country, store
// and staff both reference address, and store and staff reference each
// other.
var sakila = []Edge[string]{
	{"city", "country"}, {"address", "city"}, {"store", "address"}, {"staff", "address"},
	{"staff", "store"}, {"store", "staff"},
}

func TestOrderPutsChildrenFirst(t *testing.T) {
	order, ok := Order([]string{"country", "city", "address"}, sakila[:2], alpha)
	require.True(t, ok)
	require.Equal(t, []string{"address", "city", "country"}, order)
}

func TestOrderTiesGoByBefore(t *testing.T) {
	order, ok := Order([]string{"c", "b", "a", "p"}, []Edge[string]{{"c", "p"}, {"b", "p"}, {"a", "p"}}, alpha)
	require.True(t, ok)
	require.Equal(t, []string{"a", "b", "c", "p"}, order)
}

func TestOrderIgnoresSelfEdges(t *testing.T) {
	order, ok := Order([]string{"emp"}, []Edge[string]{{"emp", "emp"}}, alpha)
	require.True(t, ok)
	require.Equal(t, []string{"emp"}, order)
}

// A failed order leaves over the cycle and everything it references; only
// the cycle is one.
func TestCyclesAreOnlyTheStronglyConnectedNodes(t *testing.T) {
	nodes := []string{"address", "city", "country", "staff", "store"}
	_, ok := Order(nodes, sakila, alpha)
	require.False(t, ok)
	cycles := Cycles(nodes, sakila)
	require.Equal(t, [][]string{{"staff", "store"}}, cycles)
	keys := Within(cycles[0], sakila, func(e Edge[string]) Edge[string] { return e })
	require.Equal(t, []Edge[string]{{"staff", "store"}, {"store", "staff"}}, keys)
}

func TestCyclesFindsEachComponent(t *testing.T) {
	edges := []Edge[string]{{"a", "b"}, {"b", "a"}, {"c", "d"}, {"d", "e"}, {"e", "c"}, {"f", "f"}, {"a", "c"}}
	require.Equal(t, [][]string{{"a", "b"}, {"c", "d", "e"}}, Cycles([]string{"a", "b", "c", "d", "e", "f"}, edges))
}

func TestComponents(t *testing.T) {
	comp := Components([]string{"a", "b", "c"}, []Edge[string]{{"a", "b"}, {"b", "a"}, {"b", "c"}})
	require.Equal(t, comp["a"], comp["b"])
	require.NotEqual(t, comp["a"], comp["c"])
}
