package main

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/lifecycled/lifecycled/sdk"
)

// Counting a tenant's rows: Count, and the look-alikes it logs (rows whose
// tenant id the column's collation takes for the asked one, though they
// differ byte for byte, which the deleter leaves as other tenants' rows).

// Count counts, per table, the rows Delete would remove now.
func (d *deleter) Count(ctx context.Context, req *sdk.CountRequest) (*sdk.CountResponse, error) {
	db, m, _, vals, err := d.prepare(ctx, req.TenantID)
	if err != nil {
		return nil, err
	}
	breakdown, total, err := countRows(ctx, db, m, vals)
	if err != nil {
		return nil, err
	}
	logLookalikes(ctx, db, m, vals, req.TenantID)
	return &sdk.CountResponse{Count: total, Breakdown: breakdown}, nil
}

// countRows is Count's work, shared with Plan: per table in delete order,
// the tenant's rows now.
func countRows(ctx context.Context, db *sql.DB, m *model, vals map[*logicalTable]any) (map[string]int64, int64, error) {
	breakdown := map[string]int64{}
	var total int64
	for _, t := range m.order {
		p := newPredicate(vals)
		var n int64
		q := fmt.Sprintf("SELECT COUNT(*) FROM %s a WHERE %s", t.cat.ident(), p.gone(t, "a"))
		if err := db.QueryRowContext(ctx, q, p.args...).Scan(&n); err != nil {
			return nil, 0, classify(fmt.Errorf("count %s: %w", t.name(), err))
		}
		breakdown[t.name()] = n
		total += n
	}
	return breakdown, total, nil
}

// logLookalikes notes rows whose tenant id the column's collation takes for
// this one but that differ byte for byte ("ACME", "acme "): the deleter
// leaves them, as other tenants' rows, though the application may show them
// as this tenant's.
func logLookalikes(ctx context.Context, db *sql.DB, m *model, vals map[*logicalTable]any, tenant string) {
	for _, t := range m.tables {
		if t.tenant == nil || t.tenant.kind() != kindText {
			continue
		}
		p := newPredicate(vals)
		loose := p.loose(t, "a")
		exact := p.match(t, "a")
		var n int64
		q := fmt.Sprintf("SELECT COUNT(*) FROM %s a WHERE %s AND NOT %s", t.cat.ident(), loose, exact)
		if err := db.QueryRowContext(ctx, q, p.args...).Scan(&n); err == nil && n > 0 {
			sdk.Logger().Warn("rows whose tenant id equals this one under the column's collation but not byte for byte are left as other tenants' rows",
				"table", t.name(), "column", t.tenant.name, "collation", t.tenant.collation, "rows", n, "tenant", tenant)
		}
	}
}
