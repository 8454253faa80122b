package main

import (
	"fmt"
	"sort"

	"github.com/lifecycled/lifecycled/sdk"
)

// The drift gate. With an explicit tables list, the list is a claim that
// these are all the tables holding a tenant's data. The claim goes stale
// when someone adds a table with the tenant column, or one hanging off a
// listed table by foreign key, and the deleter would then call an erasure
// complete while that table keeps the tenant's rows. So every catalogue
// read (Configure, Count, Delete, Plan) checks the claim again and fails
// closed naming the tables it no longer covers; ignore_tables records the
// tables someone decided are not tenant data. Cascade targets pass: their
// rows go with their parents', and the plan shows them.

// resolveIgnored looks up ignore_tables like tables: each must name an
// existing table, once, and not a partition (its root decides).
func resolveIgnored(cfg config, cat *catalog) (map[uint32]*catRel, []sdk.FieldError) {
	out := map[uint32]*catRel{}
	var problems []sdk.FieldError
	for i, name := range cfg.IgnoreTables {
		field := fmt.Sprintf("ignore_tables[%d]", i)
		r, err := cat.lookup(name)
		if _, view := cat.lookupMatview(name); err != nil && view {
			continue // checkDrift reads ignore_tables for views itself
		}
		switch {
		case err != nil:
			problems = append(problems, sdk.FieldError{Field: field, Problem: err.Error()})
		case len(r.parents) > 0:
			root := cat.rels[cat.root(r.oid)].qualified()
			problems = append(problems, sdk.FieldError{Field: field, Problem: fmt.Sprintf("%s is part of %s: ignore %s", r.qualified(), root, root)})
		case out[r.oid] != nil:
			problems = append(problems, sdk.FieldError{Field: field, Problem: fmt.Sprintf("%s is listed twice", r.qualified())})
		default:
			out[r.oid] = r
		}
	}
	return out, problems
}

// ignoredView reports whether ignore_tables names the view.
func ignoredView(cfg config, cat *catalog, v catMatview) bool {
	for _, name := range cfg.IgnoreTables {
		if w, ok := cat.lookupMatview(name); ok && w.qualified() == v.qualified() {
			return true
		}
	}
	return false
}

// checkViews refuses every materialized view in schemas that has the
// tenant column and is not in ignore_tables: it keeps a copy of the
// tenant's rows that no delete reaches, and a refresh puts back only what
// its query still finds. It records the views ignore_tables names, for
// the fingerprint and the plan's notes. field is where the problem is
// reported: the tables list, or discover.
func (m *model) checkViews(cfg config, cat *catalog, schemas map[string]bool, field, why string) []sdk.FieldError {
	var problems []sdk.FieldError
	m.ignoredViews = nil
	for _, v := range cat.matviews {
		if ignoredView(cfg, cat, v) {
			m.ignoredViews = append(m.ignoredViews, v.qualified())
			continue
		}
		col := cfg.tenantColumnOf(v.schema, v.name)
		if !schemas[v.schema] || !v.cols[col] {
			continue
		}
		problems = append(problems, sdk.FieldError{Field: field, Problem: fmt.Sprintf(
			"%s %s a materialized view with the tenant column %q: no delete reaches its copy of the tenant's rows; "+
				"refresh it after erasures and add it to ignore_tables", v.qualified(), why, col)})
	}
	sort.Strings(m.ignoredViews)
	return problems
}

// checkDrift refuses, with an explicit tables list, every table that is
// neither deleted (listed or a cascade target) nor ignored but has the
// tenant column in a schema the list deletes from, or references through
// foreign keys (directly or through other such tables, from any schema) a
// table the deletion removes rows from. The tenant column is looked for in
// the list's schemas only: another application's schema, or lifecycled's
// own state store in the same database, has tenant columns that are not
// this deleter's business; a key into the deleted tables always is. In
// discover mode the set is the schema as it is, nothing to drift from,
// except materialized views: discover cannot delete from them, so one with
// the tenant column in the discovered schemas fails closed the same way.
func (m *model) checkDrift(cfg config, cat *catalog) error {
	if cfg.Discover {
		schemas := cfg.SchemaSet()
		if problems := m.checkViews(cfg, cat, schemas, "discover", "is in the discovered schemas but is"); len(problems) > 0 {
			return sdk.InvalidConfig(problems...)
		}
		return nil
	}
	why := map[uint32]string{}
	outside := func(oid uint32) bool {
		r := cat.rels[oid]
		return len(r.parents) == 0 && m.byRoot[oid] == nil && m.ignored[oid] == nil
	}
	schemas := map[string]bool{}
	for _, t := range m.byRoot {
		schemas[t.rel.schema] = true
	}
	for oid, r := range cat.rels {
		if !outside(oid) || !schemas[r.schema] {
			continue
		}
		if col, ok := r.cols[cfg.tenantColumnFor(r)]; ok {
			why[oid] = fmt.Sprintf("has the tenant column %q", col.name)
		}
	}
	// Foreign key paths, to a fixed point: a table referencing a flagged
	// table reaches the set through it.
	for grew := true; grew; {
		grew = false
		for _, f := range cat.fks {
			cr, pr := cat.root(f.child), cat.root(f.parent)
			if cr == pr || !outside(cr) || why[cr] != "" {
				continue
			}
			switch {
			case m.byRoot[pr] != nil:
				why[cr] = fmt.Sprintf("references %s (%s)", cat.rels[pr].qualified(), f.name)
			case why[pr] != "":
				why[cr] = fmt.Sprintf("references %s (%s), which is not listed either", cat.rels[pr].qualified(), f.name)
			default:
				continue
			}
			grew = true
		}
	}
	problems := m.checkViews(cfg, cat, schemas, "tables", "is not in tables but is")
	if len(why) == 0 && len(problems) == 0 {
		return nil
	}
	for oid, reason := range why {
		problems = append(problems, sdk.FieldError{Field: "tables", Problem: fmt.Sprintf(
			"%s is not in tables but %s: its rows may be tenant data this deleter would leave behind; list it (child tables first), or add it to ignore_tables",
			cat.rels[oid].qualified(), reason)})
	}
	sort.Slice(problems, func(i, j int) bool { return problems[i].Problem < problems[j].Problem })
	return sdk.InvalidConfig(problems...)
}
