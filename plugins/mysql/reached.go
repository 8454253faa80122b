package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/lifecycled/lifecycled/sdk"
)

// What the erasure reaches, modelled rather than assumed:
//
//   - A BEFORE DELETE trigger runs before each row goes and can write it
//     elsewhere: on a table the erasure deletes from it is refused before
//     anything is deleted, unless acknowledged_hooks names it; even then
//     the independent proof decides whether the erasure is verified.
//     AFTER DELETE triggers are allowed; what they remove from tables with
//     the tenant column is counted (see eraser.run).
//   - A system-versioned table keeps every row a delete removes as
//     history: refused, unless system_versioned = "delete_history".
//   - A self key whose loops could only be cut through the tenant column
//     is recorded for the preflight (model.stuckLoops).

// hookName is how acknowledged_hooks names a trigger of t.
func hookName(t *catTable, trigger string) string { return t.name() + "." + trigger }

func acknowledged(cfg config, t *catTable, trigger string) bool {
	for _, a := range cfg.AcknowledgedHooks {
		if a == hookName(t, trigger) || (t.key[0] == cfg.database && a == t.key[1]+"."+trigger) {
			return true
		}
	}
	return false
}

// checkReached refuses what the erasure cannot erase honestly on the
// tables it deletes from, and records the self keys whose loops it could
// not cut.
func (m *model) checkReached(cfg config) []sdk.FieldError {
	var problems []string
	for _, t := range append(append([]*logicalTable(nil), m.tables...), m.targets...) {
		for _, trig := range t.cat.beforeTriggers {
			if acknowledged(cfg, t.cat, trig) {
				continue
			}
			problems = append(problems, fmt.Sprintf("%s has a BEFORE DELETE trigger %s, which runs before each row goes and can write it elsewhere: "+
				"if it is meant to run, name it in acknowledged_hooks (%q) and the independent proof decides whether the erasure is verified",
				t.name(), trig, hookName(t.cat, trig)))
		}
		if t.cat.versioned && cfg.SystemVersioned != "delete_history" {
			problems = append(problems, fmt.Sprintf("%s is system-versioned: it keeps every row a delete removes as history (SELECT ... FOR SYSTEM_TIME ALL), "+
				"so the tenant's rows would stay readable; set system_versioned = \"delete_history\" to remove the table's history after the delete "+
				"(all of it, every tenant's: MariaDB cannot remove one tenant's), or keep the table out of the erasure", t.name()))
		}
		for _, e := range t.self {
			clearable := false
			for _, c := range e.fk.fkCols {
				if e.fk.nullCols[strings.ToLower(c)] && (t.tenant == nil || !strings.EqualFold(c, t.tenant.name)) {
					clearable = true
				}
			}
			if !clearable {
				m.stuckLoops = append(m.stuckLoops, e)
			}
		}
	}
	// CHAR drops trailing spaces when it stores a value, VARCHAR, TEXT and
	// the binary types keep them: where ids may hold a space, "acme " is
	// another tenant in one table and acme in the other.
	var padded, exact []string
	for _, t := range append(append([]*logicalTable(nil), m.tables...), m.targets...) {
		if t.tenant == nil {
			continue
		}
		if t.tenant.dataType == "char" {
			padded = append(padded, t.name())
		} else if t.tenant.kind() == kindText || t.tenant.kind() == kindBytes {
			exact = append(exact, t.name())
		}
	}
	if len(padded) > 0 && len(exact) > 0 && sdk.TenantIDMayContain(cfg.format, ' ') {
		problems = append(problems, fmt.Sprintf("the tenant column is CHAR in %s, which drops trailing spaces, but VARCHAR, TEXT or binary in %s, which keeps them: "+
			"under tenant_id_format %q, \"acme \" would be another tenant in some tables and acme in others; use one kind of column, one deleter for each, or a format that allows no space",
			strings.Join(padded, ", "), strings.Join(exact, ", "), cfg.format))
	}
	sort.Strings(problems)
	out := make([]sdk.FieldError, len(problems))
	for i, p := range problems {
		out[i] = sdk.FieldError{Field: fieldName(cfg), Problem: p}
	}
	return out
}

// unusedAcknowledgements are the acknowledged_hooks that name no BEFORE
// DELETE trigger of a table the erasure reaches.
func (m *model) unusedAcknowledgements(cfg config) []string {
	used := map[string]bool{}
	for _, t := range m.order {
		for _, trig := range t.cat.beforeTriggers {
			for _, a := range cfg.AcknowledgedHooks {
				if a == hookName(t.cat, trig) || (t.cat.key[0] == cfg.database && a == t.cat.key[1]+"."+trig) {
					used[a] = true
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
