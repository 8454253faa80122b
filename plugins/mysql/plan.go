package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/lifecycled/lifecycled/internal/sqldelete"
	"github.com/lifecycled/lifecycled/sdk"
)

// Plan says what Delete would delete now: a step per table in delete order
// (cascade targets are deleted explicitly, before the cascade could, so
// they are steps of their own), each with how its rows are known to be the
// tenant's and Count's exact count. It reads the schema afresh and fails
// closed as Delete would (config no longer fitting the schema, preflight).
// MySQL has no drift gate yet: unlisted tables are not looked for.
func (d *deleter) Plan(ctx context.Context, req *sdk.PlanRequest) (*sdk.PlanResponse, error) {
	db, m, cfg, vals, err := d.prepare(ctx, req.TenantID)
	if err != nil {
		return nil, err
	}
	counts, _, err := countRows(ctx, db, m, vals)
	if err != nil {
		return nil, err
	}
	resp := &sdk.PlanResponse{Fingerprint: d.fps.Of(fingerprintLines(cfg, m))}
	for _, t := range m.order {
		resp.Steps = append(resp.Steps, sdk.PlanStep{Target: t.name(), Via: via(t), Expected: counts[t.name()]})
	}
	for _, e := range m.dropped {
		resp.Notes = append(resp.Notes, fmt.Sprintf("%s: the cycle is broken here, its ON DELETE action runs on this tenant's own rows", e.describe()))
	}
	for _, l := range deleteHookLines(m) {
		resp.Notes = append(resp.Notes, l+" (runs with every delete of this tenant's rows; part of the plan: a change needs a new approval)")
	}
	resp.Notes = append(resp.Notes, settingNotes(cfg.asked)...)
	for _, t := range m.order {
		if t.cat.versioned {
			resp.Notes = append(resp.Notes, fmt.Sprintf("%s is system-versioned: after the delete its whole history is removed (DELETE HISTORY), every tenant's", t.name()))
		}
	}
	return resp, nil
}

// keyText names a foreign key by its columns: "db.lines.order_id -> db.orders".
func keyText(e *keyEdge) string {
	cols := strings.Join(e.fk.fkCols, ",")
	if len(e.fk.fkCols) > 1 {
		cols = "(" + cols + ")"
	}
	return e.child.name() + "." + cols + " -> " + e.parent.name()
}

func via(t *logicalTable) string {
	switch {
	case !t.listed:
		how := "its key path"
		if t.tenant != nil {
			how = "tenant column " + t.tenant.name
		}
		return fmt.Sprintf("reached by ON DELETE CASCADE of FK %s, deleted first by %s", sqldelete.KeyList(t.cascadeFrom, keyText), how)
	case t.tenant != nil:
		return "tenant column " + t.tenant.name
	default:
		return "FK " + sqldelete.KeyList(t.owners, keyText)
	}
}

// fingerprintLines are the facts the plan is computed from, one a line,
// for sdk.Fingerprints: the server and database (storeIdentity: an
// approved plan is for this database, not another with the same schema),
// the mode, each table in delete order with its tenant column (name and
// column type, collation) or owning keys, the order, and every foreign key
// the deletion involves. Batch size, timeouts, credentials, the tenant and
// the counts are left out.
func fingerprintLines(cfg config, m *model) []string {
	lines := []string{"lifecycled mysql plan 3", "store " + m.store}
	if m.cat != nil {
		lines = append(lines, settingLines(m.cat.session, cfg.asked)...)
	}
	lines = append(lines, fmt.Sprintf("global rows %t", m.globalRows), fmt.Sprintf("system_versioned %q", cfg.SystemVersioned))
	for _, a := range cfg.AcknowledgedHooks {
		lines = append(lines, fmt.Sprintf("acknowledged hook %q", a))
	}
	for _, name := range cfg.IgnoreTables {
		lines = append(lines, fmt.Sprintf("ignore %q", name))
	}
	if cfg.Discover {
		schemas := append([]string(nil), cfg.Schemas...)
		sort.Strings(schemas)
		lines = append(lines, fmt.Sprintf("mode discover %q", schemas))
	} else {
		lines = append(lines, "mode tables")
	}
	var order []string
	for _, t := range m.order {
		order = append(order, t.name())
		if t.cat.versioned {
			lines = append(lines, fmt.Sprintf("system-versioned %q", t.name()))
		}
		if t.tenant != nil {
			lines = append(lines, fmt.Sprintf("table %q listed=%t tenant %q %q %q", t.name(), t.listed, t.tenant.name, t.tenant.columnType, t.tenant.collation))
			continue
		}
		var keys []string
		for _, e := range t.owners {
			keys = append(keys, e.fk.name+" "+keyText(e))
		}
		sort.Strings(keys)
		lines = append(lines, fmt.Sprintf("table %q listed=%t owners %q", t.name(), t.listed, keys))
	}
	lines = append(lines, fmt.Sprintf("order %q", order))
	for _, e := range m.inbound {
		lines = append(lines, fmt.Sprintf("fk %q %q %q -> %q %q %s", e.fk.name, e.child.name(), e.fk.fkCols, e.parent.name(), e.fk.refCols, actionName(e.fk)))
	}
	return append(lines, deleteHookLines(m)...)
}

// deleteHookLines are the DELETE triggers of the tables the deletion
// removes rows from: code it runs beyond those rows (a trigger added
// after approval must need a new one).
func deleteHookLines(m *model) []string {
	var lines []string
	for _, t := range m.order {
		for _, h := range t.cat.deleteTriggers {
			lines = append(lines, fmt.Sprintf("delete hook on %q: %s", t.name(), h))
		}
	}
	return lines
}
