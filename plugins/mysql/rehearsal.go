package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/lifecycled/lifecycled/sdk"
)

// rehearse deletes one of the tenant's rows of every table with DELETE
// triggers, in one transaction that is rolled back, before anything is
// deleted for real. A trigger that refuses every delete (an append-only
// ledger's SIGNAL) would otherwise stop the erasure half way, after the
// tables before it; the rehearsal finds it while nothing has changed. A row
// its keys do not let go yet (1451: its children go in earlier steps) says
// nothing about its triggers and is passed over. A trigger with effects
// outside the transaction runs once per table: see docs/plugins.md.
func rehearse(ctx context.Context, db *sql.DB, m *model, vals map[*logicalTable]any) error {
	var hooked []*logicalTable
	for _, t := range m.order {
		if len(t.cat.deleteTriggers) > 0 {
			hooked = append(hooked, t)
		}
	}
	if len(hooked) == 0 {
		return nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return classify(err)
	}
	defer tx.Rollback()
	for _, t := range hooked {
		if _, err := tx.ExecContext(ctx, "SAVEPOINT lcd_rehearsal"); err != nil {
			return classify(err)
		}
		p := newPredicate(vals)
		q := fmt.Sprintf("DELETE FROM %s WHERE %s%s LIMIT 1", t.cat.ident(), p.gone(t, t.cat.ident()), orderBy(t))
		_, err := tx.ExecContext(ctx, q, p.args...)
		var me *mysql.MySQLError
		switch {
		case err == nil:
		case errors.As(err, &me) && (me.Number == 1451 || me.Number == 1452):
		case errors.As(err, &me) && !retryableErrors[me.Number]:
			return sdk.Permanent(fmt.Errorf("erasure refused before deleting anything: deleting a row of %s fails in a rehearsal (one row, rolled back): %s; "+
				"a trigger on it refuses the delete (%s)", t.name(), me.Message, strings.Join(triggerNames(t), ", ")))
		default:
			return classify(err)
		}
		if _, err := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT lcd_rehearsal"); err != nil {
			return classify(err)
		}
	}
	return nil
}

// triggerNames are t's DELETE triggers as the plan names them.
func triggerNames(t *logicalTable) []string {
	out := make([]string, len(t.cat.deleteTriggers))
	for i, d := range t.cat.deleteTriggers {
		out[i], _, _ = strings.Cut(d, ":")
	}
	return out
}
