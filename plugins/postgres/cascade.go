package main

import (
	"fmt"
	"strings"

	"github.com/lifecycled/lifecycled/sdk"
)

// addCascadeTargets finds tables outside the set that ON DELETE CASCADE
// reaches from it. Those with the tenant column lose this tenant's rows with
// their parents (and are counted); rows of any other table reached this
// way are refused by the preflight.
func (m *model) addCascadeTargets(cfg config, cat *catalog) error {
	queue := append([]*logicalTable(nil), m.tables...)
	for len(queue) > 0 {
		from := queue[0]
		queue = queue[1:]
		for _, e := range m.inbound {
			if e.parentT != from || e.fk.action != 'c' || (e.childT != nil && e.childT.listed) {
				continue
			}
			cr := cat.root(e.child.oid)
			child := cat.rels[cr]
			col, ok := child.cols[cfg.tenantColumnFor(child)]
			if !ok {
				continue // any such row is not provably this tenant's: the preflight refuses it
			}
			t := m.byRoot[cr]
			if t == nil {
				if p := columnProblem(col); p != "" {
					return sdk.InvalidConfig(sdk.FieldError{Field: fieldName(cfg), Problem: fmt.Sprintf(
						"%s.%s, reached by ON DELETE CASCADE of %s: %s", child.qualified(), col.name, e.fk.name, p)})
				}
				t = &logicalTable{rel: child, tenant: &col}
				for _, oid := range cat.tree(cr) {
					if cat.rels[oid].kind == 'r' {
						t.leaves = append(t.leaves, cat.rels[oid])
					}
				}
				m.byRoot[cr] = t
				m.targets = append(m.targets, t)
				// Keys into the new target, and keys of it, are now edges of the model.
				for _, f := range cat.fks {
					if cat.root(f.parent) == cr {
						m.inbound = append(m.inbound, &keyEdge{fk: f, child: cat.rels[f.child], parent: cat.rels[f.parent], childTree: cat.covered(f.child),
							childT: m.byRoot[cat.root(f.child)], parentT: t})
					}
				}
				for _, in := range m.inbound {
					if in.childT == nil && cat.root(in.child.oid) == cr {
						in.childT = t
					}
				}
				queue = append(queue, t)
			} else if reaches(t, from) {
				return sdk.InvalidConfig(sdk.FieldError{Field: fieldName(cfg), Problem: fmt.Sprintf(
					"ON DELETE CASCADE keys loop through tables this deleter does not list (%s and %s): list them", t.name(), from.name())})
			}
			e.childT = t
			t.cascadeFrom = append(t.cascadeFrom, e)
		}
	}
	return nil
}

// checkVisibility refuses what would let the deleter's reads disagree with
// what its deletes do: row-level security hiding rows of any table the
// preflight reads or a cascade reaches (the cascade ignores it), and tenant
// columns that compare ids by different rules (a citext column would take
// "ACME"'s rows when erasing "acme", who is another tenant in a text column).
func (m *model) checkVisibility(cfg config, cat *catalog) error {
	var problems []sdk.FieldError
	seen := map[uint32]bool{}
	check := func(root uint32, why string) {
		for _, oid := range cat.tree(root) {
			r := cat.rels[oid]
			if seen[oid] || !r.hiddenRows {
				continue
			}
			seen[oid] = true
			problems = append(problems, sdk.FieldError{Field: fieldName(cfg), Problem: fmt.Sprintf(
				"%s (%s) has row-level security that may hide rows from the deleter's role, so the preflight could not see rows a cascade or key would reach: "+
					"connect as a role with BYPASSRLS, or as the owner of a table whose row security is not FORCEd", r.qualified(), why)})
		}
	}
	for _, e := range m.inbound {
		check(cat.root(e.child.oid), "it references "+e.parent.qualified()+" through "+e.fk.name)
	}
	for _, t := range m.targets {
		check(t.rel.oid, "a cascade reaches it")
	}
	var ci, cs []string
	for _, t := range append(append([]*logicalTable(nil), m.tables...), m.targets...) {
		if t.tenant == nil {
			continue
		}
		if t.tenant.caseInsensitive() {
			ci = append(ci, t.name())
		} else {
			cs = append(cs, t.name())
		}
	}
	if len(ci) > 0 && len(cs) > 0 {
		problems = append(problems, sdk.FieldError{Field: fieldName(cfg), Problem: fmt.Sprintf(
			"the tenant column compares case-insensitively in %s (citext) but not in %s: \"ACME\" and \"acme\" would be one tenant in some tables and two in others; use one kind of column, or one deleter for each",
			strings.Join(ci, ", "), strings.Join(cs, ", "))})
	}
	// char(n) ignores trailing blanks, text and varchar do not: where ids
	// may hold a blank, "acme " is another tenant in one table and acme in
	// the other.
	var padded, exact []string
	for _, t := range append(append([]*logicalTable(nil), m.tables...), m.targets...) {
		if t.tenant == nil {
			continue
		}
		switch t.tenant.kind() {
		case "bpchar":
			padded = append(padded, t.name())
		case "text", "varchar", "citext":
			exact = append(exact, t.name())
		}
	}
	if len(padded) > 0 && len(exact) > 0 && sdk.TenantIDMayContain(cfg.format, ' ') {
		problems = append(problems, sdk.FieldError{Field: fieldName(cfg), Problem: fmt.Sprintf(
			"the tenant column is char(n) in %s, which ignores trailing blanks, but text or varchar in %s, which does not: under tenant_id_format %q, "+
				"\"acme \" would be another tenant in some tables and acme in others; use one kind of column, one deleter for each, or a format that allows no blank",
			strings.Join(padded, ", "), strings.Join(exact, ", "), cfg.format)})
	}
	if len(problems) > 0 {
		return sdk.InvalidConfig(problems...)
	}
	return nil
}

// reaches reports whether cascade target t is upstream of from.
func reaches(t, from *logicalTable) bool {
	seen := map[*logicalTable]bool{}
	var walk func(x *logicalTable) bool
	walk = func(x *logicalTable) bool {
		if x == t {
			return true
		}
		if seen[x] || x.listed {
			return false
		}
		seen[x] = true
		for _, e := range x.cascadeFrom {
			if walk(e.parentT) {
				return true
			}
		}
		return false
	}
	return walk(from)
}
