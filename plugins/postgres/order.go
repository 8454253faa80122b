package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/lifecycled/lifecycled/sdk"
)

// setNullStripsTenant reports whether e's ON DELETE SET NULL/DEFAULT would
// take a row of its child out of its tenant: it writes the tenant column,
// or it is how a table without one belongs to a tenant.
func setNullStripsTenant(e *medge) bool {
	if e.fk.action != 'n' && e.fk.action != 'd' {
		return false
	}
	t := e.childT
	if t == nil {
		return false
	}
	if t.tenant == nil {
		return slices.Contains(t.owners, e)
	}
	return slices.Contains(e.fk.changed(), t.tenant.name)
}

// order sorts the set child first. Inside a cycle, keys that cannot fail
// when the parent goes first are given up (CASCADE, then SET NULL/DEFAULT);
// a cycle left is deleted in one transaction when every key in it is
// DEFERRABLE NO ACTION, and refused otherwise.
func (m *model) order(cfg config) error {
	var edges []*medge
	for _, t := range m.tables {
		for _, e := range m.inbound {
			if e.childT == t && e.parentT != nil && e.parentT.listed && e.parentT != t {
				edges = append(edges, e)
			}
		}
	}
	owner := func(e *medge) bool { return e.childT.tenant == nil && slices.Contains(e.childT.owners, e) }
	for _, dropAction := range []string{"c", "nd"} {
		comp := sccs(m.tables, edges)
		kept := edges[:0:0]
		for _, e := range edges {
			if comp[e.childT] == comp[e.parentT] && strings.IndexByte(dropAction, e.fk.action) >= 0 && !owner(e) {
				m.dropped = append(m.dropped, e)
				continue
			}
			kept = append(kept, e)
		}
		edges = kept
	}
	comp := sccs(m.tables, edges)
	members := map[int][]*mtable{}
	for _, t := range m.tables {
		members[comp[t]] = append(members[comp[t]], t)
	}
	rank := func(t *mtable) (int, string) {
		if cfg.Discover {
			return 0, t.name()
		}
		return t.pos, t.name()
	}
	before := func(a, b *mtable) bool {
		pa, na := rank(a)
		pb, nb := rank(b)
		if pa != pb {
			return pa < pb
		}
		return na < nb
	}
	// Inside a cycle, DEFERRABLE NO ACTION keys are checked at commit, so
	// the cycle is deleted in one transaction in the order its other keys
	// need; those others must not form a cycle themselves.
	inner := map[int][]*mtable{}
	for c, ts := range members {
		if len(ts) == 1 {
			inner[c] = ts
			continue
		}
		var hard []*medge
		for _, e := range edges {
			// A key through which a table without the tenant column belongs
			// to the tenant stays ordered even when deferrable: its rows are
			// found through the parent's, which must still be there.
			if comp[e.childT] == c && comp[e.parentT] == c && (!(e.fk.action == 'a' && e.fk.deferrable) || owner(e)) {
				hard = append(hard, e)
			}
		}
		order, cyc := topoOrder(ts, hard, before)
		if cyc != nil {
			var names []string
			for _, t := range cyc {
				names = append(names, t.name())
			}
			sort.Strings(names)
			var culprit *medge
			for _, e := range hard {
				if slices.Contains(cyc, e.childT) && slices.Contains(cyc, e.parentT) {
					culprit = e
					break
				}
			}
			return sdk.InvalidConfig(sdk.FieldError{Field: fieldName(cfg), Problem: fmt.Sprintf(
				"foreign keys form a cycle between %s that no delete order satisfies (%s is %s): "+
					"make one key of the cycle DEFERRABLE (the cycle is then deleted in one transaction with its keys deferred) or ON DELETE CASCADE",
				strings.Join(names, ", "), culprit.describe(), actionName(culprit.fk))})
		}
		inner[c] = order
	}

	// The components in order, child first.
	heads := make([]*mtable, 0, len(members))
	headOf := map[*mtable]*mtable{}
	for c, ts := range inner {
		head := ts[0]
		for _, t := range ts {
			if before(t, head) {
				head = t
			}
		}
		heads = append(heads, head)
		for _, t := range members[c] {
			headOf[t] = head
		}
	}
	var between []*medge
	for _, e := range edges {
		if comp[e.childT] != comp[e.parentT] {
			between = append(between, &medge{fk: e.fk, childT: headOf[e.childT], parentT: headOf[e.parentT]})
		}
	}
	order, _ := topoOrder(heads, between, before) // acyclic: components
	m.tables = nil
	for _, head := range order {
		ts := inner[comp[head]]
		m.steps = append(m.steps, step{tables: ts})
		m.tables = append(m.tables, ts...)
	}
	if !cfg.Discover {
		// An explicit list states the order: a listed parent before its
		// child is a mistake worth saying, not silently fixing.
		for _, e := range edges {
			if comp[e.childT] != comp[e.parentT] && e.childT.pos > e.parentT.pos {
				return sdk.InvalidConfig(sdk.FieldError{Field: "tables", Problem: fmt.Sprintf(
					"%s references %s (%s), so it must be listed before it: list child tables first",
					e.childT.name(), e.parentT.name(), e.fk.name)})
			}
		}
	}
	return nil
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
		if e.childT == e.parentT || seen[k] {
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

func fieldName(cfg config) string {
	if cfg.Discover {
		return "discover"
	}
	return "tables"
}

func actionName(f catFK) string {
	s := map[byte]string{'a': "NO ACTION", 'r': "RESTRICT", 'c': "ON DELETE CASCADE", 'n': "ON DELETE SET NULL", 'd': "ON DELETE SET DEFAULT"}[f.action]
	if (f.action == 'a' || f.action == 'r') && !f.deferrable {
		s += ", not deferrable"
	}
	return s
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
