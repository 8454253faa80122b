package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/lifecycled/lifecycled/sdk"
)

// sortTables orders the set and the targets child first. Inside a cycle,
// keys that cannot fail when the parent goes first are given up (CASCADE,
// then SET NULL/DEFAULT); MySQL checks every other key row by row and
// cannot defer it, so a cycle left is refused.
func (m *model) sortTables(cfg config) error {
	all := append(append([]*mtable(nil), m.tables...), m.targets...)
	var edges []*medge
	for _, e := range m.inbound {
		if e.childT != nil && e.parentT != nil && e.childT != e.parentT {
			edges = append(edges, e)
		}
	}
	cyclic := sccs(all, edges)
	for _, drop := range []string{"c", "nd"} {
		comp := sccs(all, edges)
		kept := edges[:0:0]
		for _, e := range edges {
			if comp[e.childT] == comp[e.parentT] && strings.IndexByte(drop, e.fk.action) >= 0 && !owner(e) {
				m.dropped = append(m.dropped, e)
				continue
			}
			kept = append(kept, e)
		}
		edges = kept
	}
	// InnoDB checks every key row by row, even against the row it is
	// deleting: a cascade through a cycle trips over a NO ACTION key of the
	// same cycle that still points at the row the cascade removes.
	for _, c := range m.dropped {
		if c.fk.action != 'c' {
			continue
		}
		for _, e := range edges {
			if cyclic[e.childT] == cyclic[c.childT] && cyclic[e.parentT] == cyclic[c.childT] && (e.fk.action == 'a' || e.fk.action == 'r') {
				return sdk.InvalidConfig(sdk.FieldError{Field: fieldName(cfg), Problem: fmt.Sprintf(
					"foreign keys form a cycle between %s and %s in which %s cascades but %s is %s: MySQL checks keys row by row, so the cascade "+
						"would fail on it; make %s ON DELETE CASCADE too, or one key of the cycle ON DELETE SET NULL on a column that is not the tenant column",
					e.childT.name(), e.parentT.name(), c.fk.name, e.fk.name, actionName(e.fk), e.fk.name)})
			}
		}
	}
	before := func(a, b *mtable) bool {
		pa, pb := a.pos, b.pos
		if cfg.Discover && a.listed && b.listed {
			pa, pb = 0, 0
		}
		if pa != pb {
			return pa < pb
		}
		return a.name() < b.name()
	}
	order, cyc := topoOrder(all, edges, before)
	if cyc != nil {
		var names []string
		for _, t := range cyc {
			names = append(names, t.name())
		}
		sort.Strings(names)
		var culprit *medge
		for _, e := range edges {
			if slices.Contains(cyc, e.childT) && slices.Contains(cyc, e.parentT) {
				culprit = e
				break
			}
		}
		return sdk.InvalidConfig(sdk.FieldError{Field: fieldName(cfg), Problem: fmt.Sprintf(
			"foreign keys form a cycle between %s that no delete order satisfies (%s is %s), and MySQL checks keys row by row without deferring them: "+
				"make one key of the cycle ON DELETE SET NULL on a column that is not the tenant column, or every key of it ON DELETE CASCADE",
			strings.Join(names, ", "), culprit.describe(), actionName(culprit.fk))})
	}
	m.order = order
	if !cfg.Discover {
		// An explicit list states the order: a listed parent before its
		// child is a mistake worth saying, not silently fixing.
		for _, e := range edges {
			if e.childT.listed && e.parentT.listed && e.childT.pos > e.parentT.pos {
				return sdk.InvalidConfig(sdk.FieldError{Field: "tables", Problem: fmt.Sprintf(
					"%s references %s (%s), so it must be listed before it: list child tables first",
					e.childT.name(), e.parentT.name(), e.fk.name)})
			}
		}
	}
	return nil
}

func actionName(f *catFK) string {
	return map[byte]string{'a': "NO ACTION", 'r': "RESTRICT", 'c': "ON DELETE CASCADE", 'n': "ON DELETE SET NULL", 'd': "ON DELETE SET DEFAULT"}[f.action]
}

// topoOrder sorts nodes so that the child of every edge comes before its
// parent, taking the first by before among those ready. When the edges
// form a cycle it returns the nodes left over.
func topoOrder(nodes []*mtable, edges []*medge, before func(a, b *mtable) bool) (order, cycle []*mtable) {
	pending := map[*mtable]int{}
	parents := map[*mtable][]*mtable{}
	seen := map[[2]*mtable]bool{}
	for _, e := range edges {
		k := [2]*mtable{e.childT, e.parentT}
		if seen[k] {
			continue
		}
		seen[k] = true
		pending[e.parentT]++
		parents[e.childT] = append(parents[e.childT], e.parentT)
	}
	var ready []*mtable
	for _, n := range nodes {
		if pending[n] == 0 {
			ready = append(ready, n)
		}
	}
	for len(ready) > 0 {
		sort.Slice(ready, func(i, j int) bool { return before(ready[i], ready[j]) })
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
	if len(order) < len(nodes) {
		for _, n := range nodes {
			if !slices.Contains(order, n) {
				cycle = append(cycle, n)
			}
		}
		return nil, cycle
	}
	return order, nil
}

// sccs labels the strongly connected components of the child->parent graph
// (Tarjan).
func sccs(nodes []*mtable, edges []*medge) map[*mtable]int {
	out := map[*mtable][]*mtable{}
	for _, e := range edges {
		out[e.childT] = append(out[e.childT], e.parentT)
	}
	index, low := map[*mtable]int{}, map[*mtable]int{}
	onStack := map[*mtable]bool{}
	var stack []*mtable
	comp := map[*mtable]int{}
	next, label := 0, 0
	var strong func(v *mtable)
	strong = func(v *mtable) {
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

// stepOf is t's place in the delete order (-1 outside it).
func (m *model) stepOf(t *mtable) int { return slices.Index(m.order, t) }

// planCascades finds, for each table, the tables a batch of it can remove
// rows of by cascade: through keys given up in a cycle (their child is not
// emptied before it).
func (m *model) planCascades() {
	for _, t := range m.order {
		seen := map[*mtable]bool{}
		queue := []*mtable{t}
		for len(queue) > 0 {
			x := queue[0]
			queue = queue[1:]
			for _, e := range m.inbound {
				if e.parentT != x || e.fk.action != 'c' || e.childT == nil || seen[e.childT] || e.childT == e.parentT {
					// A self key never cascades: leaves go first, and a loop
					// is cut (its key set to NULL) before it is deleted.
					continue
				}
				if m.stepOf(e.childT) < m.stepOf(t) {
					continue // emptied of this tenant before t
				}
				seen[e.childT] = true
				t.cascades = append(t.cascades, e.childT)
				queue = append(queue, e.childT)
			}
		}
	}
}
