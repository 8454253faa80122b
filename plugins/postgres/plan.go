package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/lifecycled/lifecycled/internal/sqldelete"
	"github.com/lifecycled/lifecycled/sdk"
)

// Plan says what Delete would delete now: a step per table in delete
// order (a cascade target right after the table whose cascade reaches it),
// each with how its rows are known to be the tenant's and Count's exact
// count. It reads the schema afresh and fails closed as Delete would: on
// drift from an explicit tables list (see checkDrift), and when the
// preflight would refuse the deletion.
func (d *deleter) Plan(ctx context.Context, req *sdk.PlanRequest) (*sdk.PlanResponse, error) {
	pool, m, cfg, err := d.prepare(ctx, req.TenantID)
	if err != nil {
		return nil, err
	}
	counts, _, err := countRows(ctx, pool, m, req.TenantID)
	if err != nil {
		return nil, err
	}
	resp := &sdk.PlanResponse{Fingerprint: d.fps.Of(fingerprintLines(cfg, m)), Notes: planNotes(m)}
	for _, t := range m.planOrder() {
		resp.Steps = append(resp.Steps, sdk.PlanStep{Target: t.name(), Via: via(t), Expected: counts[t.name()]})
	}
	return resp, nil
}

// planOrder is the set in delete order with each cascade target placed
// after the first table whose cascade reaches it.
func (m *model) planOrder() []*logicalTable {
	var out []*logicalTable
	placed := map[*logicalTable]bool{}
	var place func(t *logicalTable)
	place = func(t *logicalTable) {
		if placed[t] {
			return
		}
		placed[t] = true
		out = append(out, t)
		for _, x := range m.targets {
			if len(x.cascadeFrom) > 0 && x.cascadeFrom[0].parentT == t {
				place(x)
			}
		}
	}
	for _, t := range m.tables {
		place(t)
	}
	for _, x := range m.targets {
		place(x)
	}
	return out
}

// keyText names a foreign key by its columns: "public.lines.order_id -> public.orders".
func keyText(e *keyEdge) string {
	cols := strings.Join(e.fk.fkCols, ",")
	if len(e.fk.fkCols) > 1 {
		cols = "(" + cols + ")"
	}
	return e.child.qualified() + "." + cols + " -> " + e.parent.qualified()
}

// via says how t's rows are known to be the tenant's. It names columns and
// keys, never the tenant.
func via(t *logicalTable) string {
	switch {
	case !t.listed:
		return fmt.Sprintf("ON DELETE CASCADE of FK %s, rows with tenant column %s", sqldelete.KeyList(t.cascadeFrom, keyText), t.tenant.name)
	case t.tenant != nil:
		return "tenant column " + t.tenant.name
	default:
		return "FK " + sqldelete.KeyList(t.owners, keyText)
	}
}

// fingerprintLines are the facts the plan is computed from, one a line,
// for sdk.Fingerprints: the database (storeIdentity: an approved plan is
// for this database, not another with the same schema), the mode, the
// ignored tables and materialized views, each table of the set and every
// cascade target with its tenant column (name and base type) or owning
// keys, the delete order, and every foreign key the deletion involves with
// its columns, action and deferrability. Partitions, indexes, batch size,
// timeouts, credentials, the tenant and the counts are left out: none
// changes what is deleted or how it is reached.
func fingerprintLines(cfg config, m *model) []string {
	lines := []string{"lifecycled postgres plan 3", "store " + m.store}
	lines = append(lines, settingLines(m.settings)...)
	lines = append(lines, fmt.Sprintf("global rows %t", m.globalRows))
	lines = append(lines, acknowledgedLines(cfg)...)
	if cfg.Discover {
		schemas := append([]string(nil), cfg.Schemas...)
		sort.Strings(schemas)
		lines = append(lines, fmt.Sprintf("mode discover %q", schemas))
	} else {
		lines = append(lines, "mode tables")
	}
	for _, r := range m.ignored {
		lines = append(lines, fmt.Sprintf("ignore %q", r.qualified()))
	}
	for _, v := range m.ignoredViews {
		lines = append(lines, fmt.Sprintf("ignore materialized view %q", v))
	}
	var order []string
	for _, s := range m.steps {
		var names []string
		for _, t := range s.tables {
			lines = append(lines, fmt.Sprintf("table %q %s", t.name(), tableIdentity(t)))
			names = append(names, t.name())
		}
		order = append(order, strings.Join(names, " + "))
	}
	lines = append(lines, fmt.Sprintf("order %q", order))
	for _, t := range m.targets {
		lines = append(lines, fmt.Sprintf("cascade %q %s", t.name(), tableIdentity(t)))
	}
	for _, e := range m.inbound {
		lines = append(lines, fmt.Sprintf("fk %q %q %q -> %q %q %s deferrable=%t set=%q types=%q",
			e.fk.name, e.child.qualified(), e.fk.fkCols, e.parent.qualified(), e.fk.refCols, actionName(e.fk), e.fk.deferrable, e.fk.setCols, e.fk.refTypes))
	}
	return append(lines, deleteHookLines(m)...)
}

// deleteHookLines are what a delete of the model's tables runs or reaches
// beyond their own rows: the DELETE triggers and rules of every relation
// of their trees, and the tables made children of them by inheritance
// (whose rows a DELETE of the parent deletes too). Partitions are left
// out (see planNotes); their own triggers are not.
func deleteHookLines(m *model) []string {
	if m.cat == nil {
		return nil
	}
	var lines []string
	for _, t := range append(append([]*logicalTable(nil), m.tables...), m.targets...) {
		for _, oid := range m.cat.tree(t.rel.oid) {
			r := m.cat.rels[oid]
			if oid != t.rel.oid && !r.partition {
				lines = append(lines, fmt.Sprintf("inheritance child %q of %q", r.qualified(), t.name()))
			}
			for _, h := range r.hooks {
				lines = append(lines, fmt.Sprintf("delete hook on %q: %s", r.qualified(), h.text))
			}
		}
	}
	return lines
}

func tableIdentity(t *logicalTable) string {
	if t.tenant != nil {
		return fmt.Sprintf("tenant %q %q", t.tenant.name, t.tenant.base)
	}
	var keys []string
	for _, e := range t.owners {
		keys = append(keys, fmt.Sprintf("%q", e.fk.name+" "+keyText(e)))
	}
	sort.Strings(keys)
	return "owners " + strings.Join(keys, " ")
}

// planNotes tells the operator what the steps alone do not: tables left
// out on purpose, cycles deleted in one transaction, keys whose action runs
// inside the set, and partitioned tables (their partitions are not part of
// the fingerprint, so attaching one does not invalidate an approved plan).
func planNotes(m *model) []string {
	var notes []string
	notes = append(notes, settingNotes(m.settings)...)

	for _, l := range deleteHookLines(m) {
		notes = append(notes, l+" (runs with every delete of this tenant's rows; part of the plan: a change needs a new approval)")
	}
	var ignored []string
	for _, r := range m.ignored {
		ignored = append(ignored, r.qualified())
	}
	sort.Strings(ignored)
	for _, name := range ignored {
		notes = append(notes, fmt.Sprintf("%s is not deleted (ignore_tables)", name))
	}
	for _, name := range m.ignoredViews {
		notes = append(notes, fmt.Sprintf("%s is a materialized view, not deleted (ignore_tables): refresh it after erasures, or it keeps the tenant's rows", name))
	}
	for _, s := range m.steps {
		if len(s.tables) > 1 {
			var names []string
			for _, t := range s.tables {
				names = append(names, t.name())
			}
			notes = append(notes, fmt.Sprintf("%s reference each other: deleted in one transaction with their DEFERRABLE keys deferred", strings.Join(names, ", ")))
		}
	}
	for _, e := range m.dropped {
		notes = append(notes, fmt.Sprintf("%s: the cycle is broken here, its %s runs on this tenant's own rows", e.describe(), actionName(e.fk)))
	}
	for _, t := range m.planOrder() {
		if len(t.leaves) > 1 || (len(t.leaves) == 1 && t.leaves[0] != t.rel) {
			notes = append(notes, fmt.Sprintf("%s is stored in %d partitions or child tables, deleted one by one", t.name(), len(t.leaves)))
		}
	}
	return notes
}
