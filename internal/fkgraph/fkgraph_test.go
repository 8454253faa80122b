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

func TestLoopIsThePathBackToANodeOnIt(t *testing.T) {
	next := func(edges map[string][]string) func(string) []string {
		return func(n string) []string { return edges[n] }
	}
	require.Equal(t, []string{"a", "b", "c", "b"}, Loop([]string{"a"}, next(map[string][]string{"a": {"b"}, "b": {"c"}, "c": {"b"}})))
	require.Equal(t, []string{"x", "x"}, Loop([]string{"x"}, next(map[string][]string{"x": {"x"}})), "a node that owns itself")
	require.Nil(t, Loop([]string{"a", "d"}, next(map[string][]string{"a": {"b", "c"}, "b": {"c"}, "d": {"c"}})), "shared parents are no loop")
	require.Equal(t, []string{"d", "e", "d"}, Loop([]string{"a", "d"}, next(map[string][]string{"a": {"b"}, "d": {"e"}, "e": {"d"}})))
}

func TestOwnerLoopFollowsDependentTablesOnly(t *testing.T) {
	owners := map[string][]string{"likes": {"posts", "votes"}, "votes": {"likes"}, "posts": {"users"}, "users": {"posts"}}
	dependent := func(n string) bool { return n == "likes" || n == "votes" }
	got := OwnerLoop([]string{"posts", "users", "likes", "votes"}, dependent, func(n string) []string { return owners[n] }, func(n string) string { return n })
	require.Equal(t, "tables without the tenant column reference each other in a loop (likes -> votes -> likes): give one of them the tenant column", got)
	all := func(string) bool { return false }
	require.Empty(t, OwnerLoop([]string{"posts", "users"}, all, func(n string) []string { return owners[n] }, func(n string) string { return n }),
		"tables with the tenant column may reference each other")
}

func TestReferencingProblemSaysWhatDeletingWouldDo(t *testing.T) {
	r := Referencing{Rows: 3, Child: "public.comments", Parent: "public.posts", Key: "comments_post", Action: 'c', ActionName: "ON DELETE CASCADE"}
	require.Equal(t, "3 rows of public.comments that are not this tenant's reference this tenant's rows in public.posts through comments_post: "+
		"deleting this tenant would delete them too (ON DELETE CASCADE)", r.Problem())
	r.Rows, r.Action, r.ActionName = 1, 'n', "ON DELETE SET NULL"
	require.Equal(t, "1 row of public.comments that are not this tenant's reference this tenant's rows in public.posts through comments_post: "+
		"deleting this tenant would change them (ON DELETE SET NULL)", r.Problem())
	r.Action, r.ActionName, r.Unlisted = 'a', "ON DELETE NO ACTION", true
	require.Equal(t, "1 row of public.comments that this deleter does not delete reference this tenant's rows in public.posts through comments_post: "+
		"the delete would fail on them (ON DELETE NO ACTION); if they are this tenant's data, add public.comments to tables (or use discover = true)", r.Problem())
}

// A cycle's error names its tables and only the keys that form it, sorted
// whatever the order of the catalogue.
func TestNamedCyclesNameOnlyTheCyclesKeys(t *testing.T) {
	nodes := []string{"store", "staff", "address", "city", "country"}
	ends := func(e Edge[string]) Edge[string] { return e }
	name := func(n string) string { return "public." + n }
	key := func(e Edge[string]) string { return e.Child + "->" + e.Parent }
	require.Equal(t, []NamedCycle{{Tables: "public.staff, public.store", Keys: "staff->store; store->staff"}},
		NamedCycles(nodes, sakila, ends, name, key))
	require.Empty(t, NamedCycles(nodes, sakila[:4], ends, name, key))
}
