package main

import (
	"fmt"
	"sort"

	"github.com/lifecycled/lifecycled/sdk"
)

// Code that runs when the erasure deletes, modelled rather than assumed:
//
//   - A row-level BEFORE DELETE trigger can return NULL and keep the row (a
//     soft delete), or write it elsewhere; a DELETE rule can do anything
//     instead of, or besides, the delete. On a table the erasure deletes
//     from (listed, or reached by a cascade) either is refused before
//     anything is deleted, unless acknowledged_hooks names it; even then
//     the independent proof (the identities recorded before the delete)
//     decides whether the erasure is verified.
//   - Triggers that run after the delete are allowed; what they remove is
//     counted from the server's statistics (see eraser.exec).
//   - A foreign key whose triggers are disabled (ALTER TABLE ... DISABLE
//     TRIGGER ALL) has no ON DELETE action and no check: refused.

// hookName is how acknowledged_hooks names a hook of r.
func hookName(r *catRel, h catHook) string { return r.qualified() + "." + h.name }

// acknowledged reports whether cfg names the hook: "schema.table.name", or
// "table.name" for a table in public.
func acknowledged(cfg config, r *catRel, h catHook) bool {
	for _, a := range cfg.AcknowledgedHooks {
		if a == hookName(r, h) || (r.schema == "public" && a == r.name+"."+h.name) {
			return true
		}
	}
	return false
}

// checkHooks refuses the hooks that can keep or redirect deleted rows on
// every relation the erasure deletes from, unless acknowledged, and the
// foreign keys into them whose triggers are off.
func (m *model) checkHooks(cfg config) []sdk.FieldError {
	var problems []string
	for _, t := range m.reached() {
		for _, oid := range m.cat.tree(t.rel.oid) {
			r := m.cat.rels[oid]
			for _, h := range r.hooks {
				if !h.swallows || acknowledged(cfg, r, h) {
					continue
				}
				what := "a row-level BEFORE DELETE trigger " + h.name + ", which can keep the rows a delete removes (RETURN NULL) or write them elsewhere"
				if h.rule {
					what = "a DELETE rule " + h.name + ", which can do something else instead of, or besides, the delete"
				}
				problems = append(problems, fmt.Sprintf("%s has %s (%s): erasing through it could leave the tenant's rows or copy them; "+
					"if it is meant to run, name it in acknowledged_hooks (%q) and the independent proof decides whether the erasure is verified",
					r.qualified(), what, h.text, hookName(r, h)))
			}
		}
	}
	for _, e := range m.inbound {
		if e.fk.triggersOff {
			problems = append(problems, fmt.Sprintf("foreign key %s has triggers that are disabled (ALTER TABLE %s DISABLE TRIGGER ALL, or a trigger enabled for replica only): "+
				"its %s and its check would not run; enable them (ALTER TABLE ... ENABLE TRIGGER ALL)",
				e.describe(), e.parent.qualified(), actionName(e.fk)))
		}
	}
	sort.Strings(problems)
	out := make([]sdk.FieldError, len(problems))
	for i, p := range problems {
		out[i] = sdk.FieldError{Field: fieldName(cfg), Problem: p}
	}
	return out
}

// reached are the tables the erasure deletes from: the set and the
// cascade targets.
func (m *model) reached() []*logicalTable {
	return append(append([]*logicalTable(nil), m.tables...), m.targets...)
}

// unusedAcknowledgements are the acknowledged_hooks that name no hook of a
// reached table (a hook dropped since, a typo).
func (m *model) unusedAcknowledgements(cfg config) []string {
	used := map[string]bool{}
	for _, t := range m.reached() {
		for _, oid := range m.cat.tree(t.rel.oid) {
			r := m.cat.rels[oid]
			for _, h := range r.hooks {
				for _, a := range cfg.AcknowledgedHooks {
					if a == hookName(r, h) || (r.schema == "public" && a == r.name+"."+h.name) {
						used[a] = true
					}
				}
			}
		}
	}
	var out []string
	for _, a := range cfg.AcknowledgedHooks {
		if !used[a] {
			out = append(out, a)
		}
	}
	return out
}

// hooked reports whether deleting t's rows runs a trigger or rule (on t's
// tree or a table its cascades reach): what such a delete removes is read
// from the server's statistics, for every table.
func (m *model) hooked(t *logicalTable) bool {
	for _, x := range append([]*logicalTable{t}, t.cascades...) {
		for _, oid := range m.cat.tree(x.rel.oid) {
			if len(m.cat.rels[oid].hooks) > 0 {
				return true
			}
		}
	}
	return false
}

// acknowledgedLines are the acknowledged hooks, for the fingerprint.
func acknowledgedLines(cfg config) []string {
	var lines []string
	for _, a := range cfg.AcknowledgedHooks {
		lines = append(lines, fmt.Sprintf("acknowledged hook %q", a))
	}
	sort.Strings(lines)
	return lines
}
