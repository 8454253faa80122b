package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
	"time"

	"github.com/lifecycled/lifecycled/sdk"
)

// The witness is the first half of the erasure's independent proof, taken
// inside Delete: before anything is deleted it records the identity of
// every row the plan reaches (the primary key, another unique key of NOT
// NULL columns, or a hash of the whole row where there is none) and the
// key columns other tables reference, in temporary tables on a connection
// of its own (the server holds them). Once the deletes are done it looks
// each identity up again, and looks for rows that still reference a
// recorded key. Neither lookup uses the deletion's predicates.

// witness is one Delete's record of what it is about to remove.
type witness struct {
	conn   *sql.Conn
	m      *model
	tables []*witnessed
}

// witnessed is one table's recorded identities.
type witnessed struct {
	t        *logicalTable
	temp     string
	identity []string // nil: lcd_row (a hash of the whole row) stands for it
	cols     []string // the identity, then the columns keys into t reference
	recorded int64
}

func tempName(i int) string { return fmt.Sprintf("lcd_proof_%d", i) }

// record takes a connection of its own and records the identities of every
// row of the tenant the model reaches, before anything is deleted.
func record(ctx context.Context, db *sql.DB, m *model, vals map[*logicalTable]any) (*witness, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, classify(fmt.Errorf("proof: %w", err))
	}
	w := &witness{conn: conn, m: m}
	for i, t := range m.order {
		wt := &witnessed{t: t, temp: tempName(i), identity: t.cat.identity}
		seen := map[string]bool{}
		add := func(c string) {
			if !seen[strings.ToLower(c)] {
				seen[strings.ToLower(c)] = true
				wt.cols = append(wt.cols, c)
			}
		}
		for _, c := range wt.identity {
			add(c)
		}
		for _, e := range m.inbound {
			if e.parentT == t {
				for _, c := range e.fk.refCols {
					add(c)
				}
			}
		}
		if err := w.recordTable(ctx, wt, vals); err != nil {
			w.close()
			return nil, classify(fmt.Errorf("proof: record the rows of %s before deleting: %w", t.name(), err))
		}
		w.tables = append(w.tables, wt)
	}
	return w, nil
}

// rowHash is a hash of the whole row a (every column, NULL told apart).
func rowHash(t *catTable, a string) string {
	parts := make([]string, len(t.columns))
	for i, c := range t.columns {
		parts[i] = fmt.Sprintf("COALESCE(HEX(%s.%s), 'N')", a, quoteIdent(c))
	}
	return "SHA2(CONCAT_WS(',', " + strings.Join(parts, ", ") + "), 256)"
}

func (wt *witnessed) selectList(a string) string {
	var parts []string
	if wt.identity == nil {
		parts = append(parts, rowHash(wt.t.cat, a)+" AS lcd_row")
	}
	for _, c := range wt.cols {
		parts = append(parts, a+"."+quoteIdent(c))
	}
	return strings.Join(parts, ", ")
}

func (w *witness) recordTable(ctx context.Context, wt *witnessed, vals map[*logicalTable]any) error {
	if _, err := w.conn.ExecContext(ctx, "DROP TEMPORARY TABLE IF EXISTS "+wt.temp); err != nil {
		return err
	}
	p := newPredicate(vals)
	cond := p.gone(wt.t, "a")
	if _, err := w.conn.ExecContext(ctx, fmt.Sprintf("CREATE TEMPORARY TABLE %s ENGINE=InnoDB AS SELECT %s FROM %s a WHERE %s",
		wt.temp, wt.selectList("a"), wt.t.cat.ident(), cond), p.args...); err != nil {
		return err
	}
	return w.conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+wt.temp).Scan(&wt.recorded)
}

// matches is the condition that row a of t is the recorded row p.
func (wt *witnessed) matches(a, p string) string {
	if wt.identity == nil {
		return rowHash(wt.t.cat, a) + " = " + p + ".lcd_row"
	}
	var conds []string
	for _, c := range wt.identity {
		conds = append(conds, fmt.Sprintf("%s.%s = %s.%s", a, quoteIdent(c), p, quoteIdent(c)))
	}
	return strings.Join(conds, " AND ")
}

// check looks, after the deletes, for every recorded row that is still
// there, and for rows that reference a recorded key of a removed row
// through a key the plan followed.
func (w *witness) check(ctx context.Context) ([]sdk.ProofCheck, error) {
	var out []sdk.ProofCheck
	byTable := map[*logicalTable]*witnessed{}
	for _, wt := range w.tables {
		byTable[wt.t] = wt
		c := sdk.ProofCheck{Kind: sdk.ProofIdentities, Target: wt.t.name(), Checked: wt.recorded}
		if wt.recorded > 0 {
			q := fmt.Sprintf("SELECT COUNT(*) FROM %s p WHERE EXISTS (SELECT 1 FROM %s a WHERE %s)", wt.temp, wt.t.cat.ident(), wt.matches("a", "p"))
			if err := w.conn.QueryRowContext(ctx, q).Scan(&c.Found); err != nil {
				return nil, classify(fmt.Errorf("proof: look up the rows of %s recorded before deleting: %w", wt.t.name(), err))
			}
		}
		if wt.identity == nil {
			c.Detail = "no unique key of NOT NULL columns: rows identified by their whole content"
		}
		if c.Found > 0 {
			hint := "still there after their delete"
			if len(wt.t.cat.beforeTriggers) > 0 {
				hint += "; " + strings.Join(wt.t.cat.beforeTriggers, ", ") + " ran before each delete"
			}
			c.Detail = strings.TrimPrefix(c.Detail+"; ", "; ") + hint
		}
		out = append(out, c)
	}
	for _, e := range w.m.inbound {
		wt := byTable[e.parentT]
		if wt == nil || wt.recorded == 0 {
			continue
		}
		c := sdk.ProofCheck{Kind: sdk.ProofOrphans, Target: keyText(e) + " (" + e.fk.name + ")", Checked: wt.recorded}
		q := fmt.Sprintf("SELECT COUNT(*) FROM %s c WHERE (%s) IN (SELECT %s FROM %s p) AND NOT EXISTS (SELECT 1 FROM %s x WHERE (%s) = (%s))",
			e.child.ident(), cols("c", e.fk.fkCols), cols("p", e.fk.refCols), wt.temp,
			e.parent.ident(), cols("x", e.fk.refCols), cols("c", e.fk.fkCols))
		if err := w.conn.QueryRowContext(ctx, q).Scan(&c.Found); err != nil {
			return nil, classify(fmt.Errorf("proof: look for rows referencing removed rows through %s: %w", e.fk.name, err))
		}
		if c.Found > 0 {
			c.Detail = fmt.Sprintf("rows of %s still reference rows of %s the erasure removed: the key's %s did not run", e.child.name(), e.parent.name(), actionName(e.fk))
		}
		out = append(out, c)
	}
	return out, nil
}

// close drops the temporary tables and hands the connection back (or
// closes it, if that fails).
func (w *witness) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, wt := range w.tables {
		if _, err := w.conn.ExecContext(ctx, "DROP TEMPORARY TABLE IF EXISTS "+wt.temp); err != nil {
			_ = w.conn.Raw(func(any) error { return driver.ErrBadConn })
			break
		}
	}
	_ = w.conn.Close()
}
