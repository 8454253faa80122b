package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lifecycled/lifecycled/sdk"
)

// errRehearsed ends the rehearsal's transaction: it is always rolled back.
var errRehearsed = errors.New("rehearsal done")

// rehearse deletes one of the tenant's rows of every table whose delete
// runs a trigger or rule (its own, or a table's its cascade reaches), in
// one transaction that is rolled back, before anything is deleted for
// real. A trigger that refuses every delete (an append-only ledger's
// RAISE) would otherwise stop the erasure half way, after the tables
// before it; the rehearsal finds it while nothing has changed. A row its
// keys do not let go yet (its children are deleted in earlier steps) says
// nothing about its hooks and is passed over; so are tables without
// hooks, which the preflight covers. A hook with effects outside the
// transaction (dblink, a foreign table) runs once per table: see
// docs/plugins.md.
func rehearse(ctx context.Context, pool *pgxpool.Pool, m *model, tenant string) error {
	var hooked []*logicalTable
	for _, t := range m.reached() {
		if m.hooked(t) {
			hooked = append(hooked, t)
		}
	}
	if len(hooked) == 0 {
		return nil
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, t := range hooked {
			if _, err := tx.Exec(ctx, "SAVEPOINT lcd_rehearsal"); err != nil {
				return err
			}
			p := &predicate{}
			q := fmt.Sprintf("DELETE FROM %s a WHERE (a.tableoid, a.ctid) IN (SELECT b.tableoid, b.ctid FROM %s b WHERE %s LIMIT 1)",
				t.rel.ident(), t.rel.ident(), p.gone(t, "b"))
			_, err := tx.Exec(ctx, q, tenant)
			var pgErr *pgconn.PgError
			switch {
			case err == nil:
			case errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "23"):
				// A key stops this row here; the real erasure deletes its
				// children first.
			case errors.As(err, &pgErr) && !retryableCode(pgErr.Code):
				return sdk.Permanent(fmt.Errorf("erasure refused before deleting anything: deleting a row of %s fails in a rehearsal (one row, rolled back): %v; "+
					"a trigger or rule on it, or on a table its cascade reaches, refuses the delete (%s)", t.name(), pgErr.Message, strings.Join(hookNames(m, t), ", ")))
			default:
				return err
			}
			if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT lcd_rehearsal"); err != nil {
				return err
			}
		}
		return errRehearsed
	})
	if errors.Is(err, errRehearsed) {
		return nil
	}
	return classify(err)
}

// retryableCode: connection trouble, timeouts, lock waits, serialization.
func retryableCode(code string) bool {
	return strings.HasPrefix(code, "08") || strings.HasPrefix(code, "53") || strings.HasPrefix(code, "57") ||
		code == "40001" || code == "40P01" || code == "55P03"
}

// hookNames names the hooks a delete of t's rows runs.
func hookNames(m *model, t *logicalTable) []string {
	var names []string
	for _, x := range append([]*logicalTable{t}, t.cascades...) {
		for _, oid := range m.cat.tree(x.rel.oid) {
			for _, h := range m.cat.rels[oid].hooks {
				names = append(names, hookName(m.cat.rels[oid], h))
			}
		}
	}
	return names
}
