package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/lifecycled/lifecycled/internal/fkgraph"
	"github.com/lifecycled/lifecycled/sdk"
)

// sortTables orders the set and the targets child first. Inside a cycle,
// keys that cannot fail when the parent goes first are given up (CASCADE,
// then SET NULL/DEFAULT); MySQL checks every other key row by row and
// cannot defer it, so a cycle left is refused.
func (m *model) sortTables(cfg config) error {
	all := append(append([]*logicalTable(nil), m.tables...), m.targets...)
	var edges []*keyEdge
	for _, e := range m.inbound {
		if e.childT != nil && e.parentT != nil && e.childT != e.parentT {
			edges = append(edges, e)
		}
	}
	cyclic := fkgraph.Components(all, graphEdges(edges))
	for _, drop := range []string{"c", "nd"} {
		comp := fkgraph.Components(all, graphEdges(edges))
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
	extra, problems := m.cascadeRegions(edges)
	if len(problems) > 0 {
		sort.Strings(problems)
		return sdk.InvalidConfig(sdk.FieldError{Field: fieldName(cfg), Problem: strings.Join(problems, "; ")})
	}
	edges = append(edges, extra...)
	before := func(a, b *logicalTable) bool {
		pa, pb := a.pos, b.pos
		if cfg.Discover && a.listed && b.listed {
			pa, pb = 0, 0
		}
		if pa != pb {
			return pa < pb
		}
		return a.name() < b.name()
	}
	order, ok := fkgraph.Order(all, graphEdges(edges), before)
	if !ok {
		var problems []string
		for _, c := range fkgraph.NamedCycles(all, edges, edgeEnds, (*logicalTable).name, cycleKey) {
			problems = append(problems, fmt.Sprintf(
				"foreign keys form a cycle between %s that no delete order satisfies (%s), and MySQL checks keys row by row without deferring them: "+
					"make one key of the cycle ON DELETE SET NULL on a column that is not the tenant column, or every key of it ON DELETE CASCADE",
				c.Tables, c.Keys))
		}
		sort.Strings(problems)
		return sdk.InvalidConfig(sdk.FieldError{Field: fieldName(cfg), Problem: strings.Join(problems, "; ")})
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

// cascadeRegions orders what a cascade given up in a cycle needs. Each
// batch of the cascade's parent t removes, with t's rows, the rows of its
// child and of every table that cascades from those (the region). InnoDB
// checks every key row by row: a row that references the region through a
// plain key (NO ACTION, RESTRICT) must be gone before t's batch runs. From
// a table outside the region and other than t, that table is ordered
// before t (the returned edges; an order no key allows is refused as a
// cycle); from the region itself (a self key of a table the cascade
// reaches, a key back into it) no order helps, and the erasure is refused
// at Configure, naming both keys.
func (m *model) cascadeRegions(kept []*keyEdge) (extra []*keyEdge, problems []string) {
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
				if e.fk.action == 'c' && e.childT != nil && region[e.parentT] && !region[e.childT] && e.childT != t {
					region[e.childT] = true
					grew = true
				}
			}
		}
		for _, f := range m.inbound {
			if !region[f.parentT] || f.childT == nil || (f.fk.action != 'a' && f.fk.action != 'r') {
				continue
			}
			w := f.childT
			if w != t && !region[w] {
				if !seen[[2]*logicalTable{w, t}] {
					seen[[2]*logicalTable{w, t}] = true
					extra = append(extra, &keyEdge{fk: f.fk, child: f.child, parent: t.cat, childT: w, parentT: t})
				}
				continue
			}
			problems = append(problems, fmt.Sprintf("foreign keys form a cycle in which %s cascades into %s, which %s references with %s: "+
				"MySQL checks keys row by row, so a batch of %s would fail half way on rows the cascade removes; make %s ON DELETE CASCADE too, "+
				"or break the cycle with ON DELETE SET NULL on a column that is not the tenant column",
				d.describe(), f.parent.name(), f.describe(), actionName(f.fk), t.name(), f.fk.name))
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

// stepOf is t's place in the delete order (-1 outside it).
func (m *model) stepOf(t *logicalTable) int { return slices.Index(m.order, t) }

// planCascades finds, for each table, the tables a batch of it can remove
// rows of by cascade: through keys given up in a cycle (their child is not
// emptied before it).
func (m *model) planCascades() {
	for _, t := range m.order {
		seen := map[*logicalTable]bool{}
		queue := []*logicalTable{t}
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
