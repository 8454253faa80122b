package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

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
	resp := &sdk.PlanResponse{Fingerprint: fingerprint(cfg, m)}
	for _, t := range m.order {
		resp.Steps = append(resp.Steps, sdk.PlanStep{Target: t.name(), Via: via(t), Expected: counts[t.name()]})
	}
	for _, e := range m.dropped {
		resp.Notes = append(resp.Notes, fmt.Sprintf("%s: the cycle is broken here, its ON DELETE action runs on this tenant's own rows", e.describe()))
	}
	return resp, nil
}

// keyText names a foreign key by its columns: "db.lines.order_id -> db.orders".
func keyText(e *medge) string {
	cols := strings.Join(e.fk.fkCols, ",")
	if len(e.fk.fkCols) > 1 {
		cols = "(" + cols + ")"
	}
	return e.child.name() + "." + cols + " -> " + e.parent.name()
}

func via(t *mtable) string {
	switch {
	case !t.listed:
		var keys []string
		for _, e := range t.cascadeFrom {
			keys = append(keys, keyText(e))
		}
		sort.Strings(keys)
		how := "its key path"
		if t.tenant != nil {
			how = "tenant column " + t.tenant.name
		}
		return fmt.Sprintf("reached by ON DELETE CASCADE of FK %s, deleted first by %s", strings.Join(keys, " or FK "), how)
	case t.tenant != nil:
		return "tenant column " + t.tenant.name
	default:
		var keys []string
		for _, e := range t.owners {
			keys = append(keys, keyText(e))
		}
		sort.Strings(keys)
		return "FK " + strings.Join(keys, " or FK ")
	}
}

// fingerprint hashes the mode, each table in delete order with its tenant
// column (name and column type, collation) or owning keys, and every
// foreign key the deletion involves. Batch size, timeouts, the DSN, the
// tenant and the counts are left out.
func fingerprint(cfg config, m *model) string {
	var b strings.Builder
	b.WriteString("lifecycled mysql plan 1\n")
	if cfg.Discover {
		schemas := append([]string(nil), cfg.Schemas...)
		sort.Strings(schemas)
		fmt.Fprintf(&b, "discover %q\n", schemas)
	} else {
		b.WriteString("tables\n")
	}
	for i, t := range m.order {
		fmt.Fprintf(&b, "step %d %q listed=%t ", i, t.name(), t.listed)
		if t.tenant != nil {
			fmt.Fprintf(&b, "tenant %q %q %q\n", t.tenant.name, t.tenant.columnType, t.tenant.collation)
			continue
		}
		var keys []string
		for _, e := range t.owners {
			keys = append(keys, e.fk.name+" "+keyText(e))
		}
		sort.Strings(keys)
		fmt.Fprintf(&b, "owners %q\n", keys)
	}
	var lines []string
	for _, e := range m.inbound {
		lines = append(lines, fmt.Sprintf("fk %q %q %q -> %q %q %c", e.fk.name, e.child.name(), e.fk.fkCols, e.parent.name(), e.fk.refCols, e.fk.action))
	}
	sort.Strings(lines)
	for i, l := range lines {
		if i == 0 || l != lines[i-1] {
			b.WriteString(l + "\n")
		}
	}
	sum := sha256.Sum256([]byte(b.String()))
	return "sha256:" + hex.EncodeToString(sum[:])
}
