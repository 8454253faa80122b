package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/lifecycled/lifecycled/internal/fkgraph"
	"github.com/lifecycled/lifecycled/sdk"
)

// setNullStripsTenant reports whether e's ON DELETE SET NULL/DEFAULT would
// take a row of its child out of its tenant: it writes the tenant column,
// or it is how a table without one belongs to a tenant.
func setNullStripsTenant(e *keyEdge) bool {
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
	var edges []*keyEdge
	for _, t := range m.tables {
		for _, e := range m.inbound {
			if e.childT == t && e.parentT != nil && e.parentT.listed && e.parentT != t {
				edges = append(edges, e)
			}
		}
	}
	owner := func(e *keyEdge) bool { return e.childT.tenant == nil && slices.Contains(e.childT.owners, e) }
	for _, dropAction := range []string{"c", "nd"} {
		comp := fkgraph.Components(m.tables, graphEdges(edges))
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
	extra, problems := m.cascadeRegions(edges)
	if len(problems) > 0 {
		sort.Strings(problems)
		return sdk.InvalidConfig(sdk.FieldError{Field: fieldName(cfg), Problem: strings.Join(problems, "; ")})
	}
	edges = append(edges, extra...)
	comp := fkgraph.Components(m.tables, graphEdges(edges))
	members := map[int][]*logicalTable{}
	for _, t := range m.tables {
		members[comp[t]] = append(members[comp[t]], t)
	}
	rank := func(t *logicalTable) (int, string) {
		if cfg.Discover {
			return 0, t.name()
		}
		return t.pos, t.name()
	}
	before := func(a, b *logicalTable) bool {
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
	inner := map[int][]*logicalTable{}
	var cycles []string
	for c, ts := range members {
		if len(ts) == 1 {
			inner[c] = ts
			continue
		}
		var hard []*keyEdge
		for _, e := range edges {
			// A key through which a table without the tenant column belongs
			// to the tenant stays ordered even when deferrable: its rows are
			// found through the parent's, which must still be there.
			if comp[e.childT] == c && comp[e.parentT] == c && (!(e.fk.action == 'a' && e.fk.deferrable) || owner(e)) {
				hard = append(hard, e)
			}
		}
		order, ok := fkgraph.Order(ts, graphEdges(hard), before)
		if !ok {
			cycles = append(cycles, cycleProblems(ts, hard)...)
			continue
		}
		inner[c] = order
	}
	if len(cycles) > 0 {
		sort.Strings(cycles)
		return sdk.InvalidConfig(sdk.FieldError{Field: fieldName(cfg), Problem: strings.Join(cycles, "; ")})
	}

	// The components in order, child first.
	heads := make([]*logicalTable, 0, len(members))
	headOf := map[*logicalTable]*logicalTable{}
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
	var between []fkgraph.Edge[*logicalTable]
	for _, e := range edges {
		if comp[e.childT] != comp[e.parentT] {
			between = append(between, fkgraph.Edge[*logicalTable]{Child: headOf[e.childT], Parent: headOf[e.parentT]})
		}
	}
	order, _ := fkgraph.Order(heads, between, before) // acyclic: components
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

// cascadeRegions orders what a cascade given up in a cycle needs. Each
// batch of the cascade's parent t removes, with t's rows, the rows of its
// child and of every table that cascades from those (the region). A row
// that references the region through a plain key (NO ACTION, RESTRICT)
// must be gone first, or the batch fails half way:
//
//   - from a table outside the region and other than t: that table is
//     ordered before t (the returned edges: an order no key allows is a
//     cycle, refused as one);
//   - from t itself or the region: no order helps. With NO ACTION keys,
//     checked when the statement ends, t is deleted in one statement (its
//     rows referencing the region go in it too); a RESTRICT key, checked
//     row by row, is refused.
func (m *model) cascadeRegions(kept []*keyEdge) (extra []*keyEdge, problems []string) {
	isKept := map[*keyEdge]bool{}
	for _, e := range kept {
		isKept[e] = true
	}
	seen := map[[2]*logicalTable]bool{}
	for _, d := range m.dropped {
		if d.fk.action != 'c' {
			continue
		}
		t := d.parentT
		region := map[*logicalTable]bool{d.childT: true}
		for grew := true; grew; {
			grew = false
			for _, e := range m.inbound {
				if e.fk.action == 'c' && e.childT != nil && e.childT.listed && region[e.parentT] && !region[e.childT] && e.childT != t {
					region[e.childT] = true
					grew = true
				}
			}
		}
		for _, f := range m.inbound {
			if !region[f.parentT] || f.childT == nil || !f.childT.listed || (f.fk.action != 'a' && f.fk.action != 'r') || f.childT == f.parentT {
				continue
			}
			w := f.childT
			switch {
			case w != t && !region[w]:
				if !seen[[2]*logicalTable{w, t}] {
					seen[[2]*logicalTable{w, t}] = true
					extra = append(extra, &keyEdge{fk: f.fk, child: f.child, parent: t.rel, childT: w, parentT: t})
				}
			case f.fk.action == 'r':
				problems = append(problems, fmt.Sprintf("foreign keys form a cycle in which %s cascades but %s is RESTRICT, checked row by row: "+
					"a delete of %s's rows would remove, by the cascade, rows that rows not yet deleted still reference; "+
					"make %s NO ACTION or DEFERRABLE, or ON DELETE CASCADE too", d.describe(), f.describe(), t.name(), f.fk.name))
			default:
				t.whole = true
			}
		}
	}
	return extra, problems
}

// graphEdges are keys as edges of the table graph.
func graphEdges(es []*keyEdge) []fkgraph.Edge[*logicalTable] {
	out := make([]fkgraph.Edge[*logicalTable], len(es))
	for i, e := range es {
		out[i] = edgeEnds(e)
	}
	return out
}

func edgeEnds(e *keyEdge) fkgraph.Edge[*logicalTable] {
	return fkgraph.Edge[*logicalTable]{Child: e.childT, Parent: e.parentT}
}

// cycleKey is a key of a cycle as its error names it.
func cycleKey(e *keyEdge) string { return fmt.Sprintf("%s is %s", e.describe(), actionName(e.fk)) }

// cycleProblems names each cycle of hard (keys no delete order can
// satisfy) among tables, with exactly the keys that form it: never a key
// that only leads into the cycle.
func cycleProblems(tables []*logicalTable, hard []*keyEdge) []string {
	var out []string
	for _, c := range fkgraph.NamedCycles(tables, hard, edgeEnds, (*logicalTable).name, cycleKey) {
		out = append(out, fmt.Sprintf("foreign keys form a cycle between %s that no delete order satisfies (%s): "+
			"make one key of the cycle DEFERRABLE (the cycle is then deleted in one transaction with its keys deferred) or ON DELETE CASCADE",
			c.Tables, c.Keys))
	}
	return out
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
