package main

import (
	"slices"
)

// stepOf is the index of t's step in the delete order (-1 outside the set).
func (m *model) stepOf(t *logicalTable) int {
	for i, s := range m.steps {
		if slices.Contains(s.tables, t) {
			return i
		}
	}
	return -1
}

// planCascades finds, for each table of the set, the tables a batch of it
// can remove rows of by cascade: targets, and set tables that are not
// emptied before it.
func (m *model) planCascades() {
	stepOf := map[*logicalTable]int{}
	for i, s := range m.steps {
		for _, t := range s.tables {
			stepOf[t] = i
		}
	}
	for _, t := range m.tables {
		seen := map[*logicalTable]bool{t: true}
		queue := []*logicalTable{t}
		for len(queue) > 0 {
			x := queue[0]
			queue = queue[1:]
			for _, e := range m.inbound {
				if e.parentT != x || e.fk.action != 'c' || e.childT == nil || seen[e.childT] {
					continue
				}
				if e.childT.listed && stepOf[e.childT] < stepOf[t] {
					continue // emptied of this tenant before t
				}
				seen[e.childT] = true
				t.cascades = append(t.cascades, e.childT)
				queue = append(queue, e.childT)
			}
		}
	}
}
