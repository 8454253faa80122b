package erasurefuzz

import (
	"math/rand/v2"
	"sort"
)

// Drawing the rows of a schema, and who owns each.

// fill draws the rows: for every table in order, rows of each tenant and
// global rows, each key pointing at a row of the same owner mostly, at
// another owner's now and then.
func (s *Schema) fill(r *rand.Rand) {
	next := 1
	for _, t := range s.Tables {
		owners := []Owner{"A", "B", "C"}
		if t.Tenant == "" || t.TenantNull {
			owners = append(owners, "G")
		}
		for _, o := range owners {
			for k := r.IntN(5); k > 0; k-- {
				t.Rows = append(t.Rows, &Row{ID: next, Owner: o, Refs: map[string]*int{}})
				next++
			}
		}
	}
	for _, k := range s.Keys {
		for _, row := range k.Child.Rows {
			row.Refs[k.Col] = s.target(r, k, row)
		}
	}
	// Rows without the tenant column belong to whoever their keys point at.
	for _, t := range s.Tables {
		if t.Tenant != "" {
			continue
		}
		for _, row := range t.Rows {
			row.Owner = s.ownerThroughKeys(t, row, map[*Row]bool{})
		}
	}
}

// target picks the parent row a key of row points at (nil: NULL).
func (s *Schema) target(r *rand.Rand, k *Key, row *Row) *int {
	if k.Nullable && r.IntN(5) == 0 {
		return nil
	}
	var same, any []*Row
	for _, p := range k.Parent.Rows {
		if k.Aligned && p.Owner != row.Owner {
			continue // a composite key carries the tenant: only the same tenant's rows
		}
		any = append(any, p)
		if p.Owner == row.Owner || (k.Child.Tenant == "" && row.Owner == "G") {
			same = append(same, p)
		}
	}
	var pool []*Row
	switch {
	case len(same) > 0 && r.IntN(25) != 0:
		pool = same
	case len(any) > 0:
		pool = any
	}
	if len(pool) == 0 {
		if k.Parent == k.Child && !k.Nullable {
			id := row.ID // no other row to point at: itself
			return &id
		}
		// Nothing to point at: the key allows NULL after all.
		k.Nullable = true
		k.Child.Cols[k.Col] = true
		return nil
	}
	id := pool[r.IntN(len(pool))].ID
	return &id
}

// ownerThroughKeys is the owner of a row without the tenant column: the
// tenant of the rows its keys reference (global rows are nobody's), mixed
// when two tenants', nobody's when none.
func (s *Schema) ownerThroughKeys(t *Table, row *Row, seen map[*Row]bool) Owner {
	if seen[row] {
		return "N" // a loop of rows without the tenant column owns nothing
	}
	seen[row] = true
	owners := map[Owner]bool{}
	for _, k := range s.Keys {
		if k.Child != t || k.Parent == t {
			continue
		}
		v := row.Refs[k.Col]
		if v == nil {
			continue
		}
		for _, p := range k.Parent.Rows {
			if p.ID == *v {
				o := p.Owner
				if k.Parent.Tenant == "" {
					o = s.ownerThroughKeys(k.Parent, p, seen)
				}
				if o != "G" && o != "N" {
					owners[o] = true
				}
			}
		}
	}
	switch len(owners) {
	case 0:
		return "N"
	case 1:
		for o := range owners {
			return o
		}
	}
	return "X"
}

// childFirst lists the tables with the tenant column and those with a key
// into a listed one (and the audit table unless kept), children before
// parents where the keys allow, by name otherwise.
func (s *Schema) childFirst() []any {
	listed := map[*Table]bool{}
	for _, t := range s.Tables {
		listed[t] = t.Tenant != ""
	}
	for grew := true; grew; {
		grew = false
		for _, k := range s.Keys {
			if listed[k.Parent] && !listed[k.Child] {
				listed[k.Child] = true
				grew = true
			}
		}
	}
	var all []*Table
	for _, t := range s.Tables {
		if listed[t] {
			all = append(all, t)
		}
	}
	if s.Audit != nil && !s.Kept[s.Audit.Name] {
		all = append(all, s.Audit)
	}
	placed := map[*Table]bool{}
	var out []any
	for len(placed) < len(all) {
		progress := false
		for _, t := range all {
			if placed[t] {
				continue
			}
			ready := true
			for _, k := range s.Keys {
				if k.Parent == t && k.Child != t && !placed[k.Child] {
					ready = false
				}
			}
			if ready {
				placed[t] = true
				out = append(out, s.qualName(t))
				progress = true
			}
		}
		if !progress { // a cycle: the rest by name
			var rest []*Table
			for _, t := range all {
				if !placed[t] {
					rest = append(rest, t)
				}
			}
			sort.Slice(rest, func(i, j int) bool { return rest[i].Name < rest[j].Name })
			for _, t := range rest {
				placed[t] = true
				out = append(out, s.qualName(t))
			}
		}
	}
	return out
}

// qualName is how the config names a table.
