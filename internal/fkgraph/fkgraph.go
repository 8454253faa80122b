// Package fkgraph orders tables by their foreign keys for the SQL deleters
// (postgres and mysql): children before parents, strongly connected
// components for cycles, and the cycles themselves when no order exists.
// An edge is a foreign key from its child (the referencing table, whose
// rows must go first) to its parent.
package fkgraph

import (
	"fmt"
	"sort"
	"strings"
)

// Edge is a foreign key from Child to Parent.
type Edge[N comparable] struct{ Child, Parent N }

// Components labels the strongly connected components of the graph
// (Tarjan): two nodes share a label when each reaches the other.
func Components[N comparable](nodes []N, edges []Edge[N]) map[N]int {
	out := map[N][]N{}
	for _, e := range edges {
		out[e.Child] = append(out[e.Child], e.Parent)
	}
	index, low := map[N]int{}, map[N]int{}
	onStack := map[N]bool{}
	var stack []N
	comp := map[N]int{}
	next, label := 0, 0
	var strong func(v N)
	strong = func(v N) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range out[v] {
			if _, seen := index[w]; !seen {
				strong(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp[w] = label
				if w == v {
					break
				}
			}
			label++
		}
	}
	for _, v := range nodes {
		if _, seen := index[v]; !seen {
			strong(v)
		}
	}
	return comp
}

// Order sorts nodes so that the child of every edge comes before its
// parent, taking the first by before among those ready (edges from a node
// to itself are ignored). When the edges form a cycle, ok is false and
// Cycles names it.
func Order[N comparable](nodes []N, edges []Edge[N], before func(a, b N) bool) (order []N, ok bool) {
	pending := map[N]int{}
	parents := map[N][]N{}
	seen := map[Edge[N]]bool{}
	for _, e := range edges {
		if e.Child == e.Parent || seen[e] {
			continue
		}
		seen[e] = true
		pending[e.Parent]++
		parents[e.Child] = append(parents[e.Child], e.Parent)
	}
	var ready []N
	for _, n := range nodes {
		if pending[n] == 0 {
			ready = append(ready, n)
		}
	}
	for len(ready) > 0 {
		sort.SliceStable(ready, func(i, j int) bool { return before(ready[i], ready[j]) })
		n := ready[0]
		ready = ready[1:]
		order = append(order, n)
		for _, p := range parents[n] {
			pending[p]--
			if pending[p] == 0 {
				ready = append(ready, p)
			}
		}
	}
	return order, len(order) == len(nodes)
}

// Cycles returns the graph's cycles: each strongly connected component of
// two or more nodes (edges from a node to itself are not cycles here), its
// nodes in the order given, components in the order of their first node.
// The nodes a failed Order leaves over are these and every node that can
// only come after one of them; only these form the cycle.
func Cycles[N comparable](nodes []N, edges []Edge[N]) [][]N {
	var proper []Edge[N]
	for _, e := range edges {
		if e.Child != e.Parent {
			proper = append(proper, e)
		}
	}
	comp := Components(nodes, proper)
	members := map[int][]N{}
	var labels []int
	for _, n := range nodes {
		c := comp[n]
		if len(members[c]) == 0 {
			labels = append(labels, c)
		}
		members[c] = append(members[c], n)
	}
	var out [][]N
	for _, c := range labels {
		if len(members[c]) > 1 {
			out = append(out, members[c])
		}
	}
	return out
}

// Within returns the edges whose two ends are both in nodes (the keys of
// a cycle Cycles returned), in their order.
func Within[N comparable, E any](nodes []N, edges []E, ends func(E) Edge[N]) []E {
	in := map[N]bool{}
	for _, n := range nodes {
		in[n] = true
	}
	var out []E
	for _, e := range edges {
		if x := ends(e); in[x.Child] && in[x.Parent] && x.Child != x.Parent {
			out = append(out, e)
		}
	}
	return out
}

// NamedCycle is a cycle as an error names it: its tables and the keys that
// form it, each sorted (so that the text does not depend on the
// catalogue's order) and joined.
type NamedCycle struct{ Tables, Keys string }

// NamedCycles names each cycle of edges among nodes (Cycles) with exactly
// the keys that form it, never a key that only leads into it.
func NamedCycles[N comparable, E any](nodes []N, edges []E, ends func(E) Edge[N], name func(N) string, key func(E) string) []NamedCycle {
	graph := make([]Edge[N], len(edges))
	for i, e := range edges {
		graph[i] = ends(e)
	}
	var out []NamedCycle
	for _, cyc := range Cycles(nodes, graph) {
		var names, keys []string
		for _, n := range cyc {
			names = append(names, name(n))
		}
		for _, e := range Within(cyc, edges, ends) {
			keys = append(keys, key(e))
		}
		sort.Strings(names)
		sort.Strings(keys)
		out = append(out, NamedCycle{Tables: strings.Join(names, ", "), Keys: strings.Join(keys, "; ")})
	}
	return out
}

// Loop follows next from each start in turn, depth first, and returns the
// first path that comes back to a node on itself: the nodes from the
// start to the repeated node, which ends the path ("a", "b", "c", "b"); nil
// when there is no loop. The SQL deleters refuse tables without the tenant
// column that own each other in a loop: their rows would belong to a
// tenant only through themselves.
func Loop[N comparable](starts []N, next func(N) []N) []N {
	state := map[N]int{} // 1 on the path, 2 done
	var visit func(n N, path []N) []N
	visit = func(n N, path []N) []N {
		switch state[n] {
		case 1:
			return append(path, n)
		case 2:
			return nil
		}
		state[n] = 1
		for _, m := range next(n) {
			if loop := visit(m, append(path, n)); loop != nil {
				return loop
			}
		}
		state[n] = 2
		return nil
	}
	for _, n := range starts {
		if loop := visit(n, nil); loop != nil {
			return loop
		}
	}
	return nil
}

// OwnerLoop is the SQL deleters' refusal of dependent tables (those
// without the tenant column) that own each other in a loop, naming the
// Loop, or "" when there is none.
func OwnerLoop[N comparable](tables []N, dependent func(N) bool, owners func(N) []N, name func(N) string) string {
	var starts []N
	for _, t := range tables {
		if dependent(t) {
			starts = append(starts, t)
		}
	}
	loop := Loop(starts, func(t N) []N {
		var next []N
		for _, o := range owners(t) {
			if dependent(o) {
				next = append(next, o)
			}
		}
		return next
	})
	if loop == nil {
		return ""
	}
	names := make([]string, len(loop))
	for i, t := range loop {
		names[i] = name(t)
	}
	return fmt.Sprintf("tables without the tenant column reference each other in a loop (%s): give one of them the tenant column", strings.Join(names, " -> "))
}

// Referencing is rows outside a tenant's erasure that reference the
// tenant's rows through a foreign key: both SQL deleters refuse to delete
// before they are dealt with, and say so in the same words.
type Referencing struct {
	Rows   int64
	Child  string // the referencing rows' table, as the deleter names it
	Parent string // the referenced table
	Key    string // the foreign key's name
	// Action is the key's ON DELETE: 'c' cascade, 'n' set null, 'd' set
	// default, anything else restrict or no action; ActionName spells it.
	Action     byte
	ActionName string
	// Unlisted: the referencing table is not one the deleter deletes
	// (else its rows are another tenant's).
	Unlisted bool
}

// Problem is the refusal's text.
func (r Referencing) Problem() string {
	whose := "that are not this tenant's"
	if r.Unlisted {
		whose = "that this deleter does not delete"
	}
	var consequence string
	switch r.Action {
	case 'c':
		consequence = "deleting this tenant would delete them too (ON DELETE CASCADE)"
	case 'n', 'd':
		consequence = "deleting this tenant would change them (" + r.ActionName + ")"
	default:
		consequence = "the delete would fail on them (" + r.ActionName + ")"
	}
	hint := ""
	if r.Unlisted {
		hint = fmt.Sprintf("; if they are this tenant's data, add %s to tables (or use discover = true)", r.Child)
	}
	return fmt.Sprintf("%s of %s %s reference this tenant's rows in %s through %s: %s%s",
		Rows(r.Rows), r.Child, whose, r.Parent, r.Key, consequence, hint)
}

// Rows is "1 row" or "N rows".
func Rows(n int64) string {
	if n == 1 {
		return "1 row"
	}
	return fmt.Sprintf("%d rows", n)
}
