package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lifecycled/lifecycled/sdk"
)

// The witness is the first half of the erasure's independent proof, taken
// inside Delete: before anything is deleted it records the identity of
// every row the plan reaches (the primary key, another unique key of NOT
// NULL columns, or the whole row where there is none) and the key columns
// other tables reference, in temporary tables on a connection of its own
// (the server holds them: a 1M-row tenant costs the plugin no memory). Once
// the deletes are done it looks each identity up again, and looks for rows
// that still reference a recorded key. Neither lookup uses the deletion's
// predicates: a row a trigger kept, a cascade that did not run, a delete a
// rule redirected all show up, whatever the model assumed.

// witness is one Delete's record of what it is about to remove.
type witness struct {
	conn   *pgxpool.Conn
	m      *model
	tables []*witnessed
}

// witnessed is one table's recorded identities.
type witnessed struct {
	t    *mtable
	temp string
	// cols are the recorded columns: the identity, then the columns keys
	// into the table reference; nil identity means lcd_row (the row's
	// text) stands for it.
	identity []string
	cols     []string
	recorded int64
}

// tempName is the temporary table of the i-th witnessed table.
func tempName(i int) string { return fmt.Sprintf("lcd_proof_%d", i) }

// record takes a connection of its own and records the identities of
// every row of the tenant the model reaches, before anything is deleted.
func record(ctx context.Context, pool *pgxpool.Pool, m *model, tenant string) (*witness, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, classify(fmt.Errorf("proof: %w", err))
	}
	w := &witness{conn: conn, m: m}
	if _, err := conn.Exec(ctx, "DISCARD TEMP"); err != nil {
		w.close()
		return nil, classify(fmt.Errorf("proof: %w", err))
	}
	for i, t := range m.reached() {
		wt := &witnessed{t: t, temp: tempName(i), identity: t.rel.identity}
		seen := map[string]bool{}
		for _, c := range wt.identity {
			if !seen[c] {
				seen[c] = true
				wt.cols = append(wt.cols, c)
			}
		}
		for _, e := range m.inbound {
			if e.parentT != t {
				continue
			}
			for _, c := range e.fk.refCols {
				if !seen[c] {
					seen[c] = true
					wt.cols = append(wt.cols, c)
				}
			}
		}
		if err := w.recordTable(ctx, wt, tenant); err != nil {
			w.close()
			return nil, classify(fmt.Errorf("proof: record the rows of %s before deleting: %w", t.name(), err))
		}
		w.tables = append(w.tables, wt)
	}
	return w, nil
}

// selectList is what is recorded of a row of t (as alias a): its relation,
// its identity (or its text) and the referenced columns.
func (wt *witnessed) selectList(a string) string {
	parts := []string{a + ".tableoid AS lcd_rel"}
	if wt.identity == nil {
		parts = append(parts, "md5("+a+"::text) AS lcd_row")
	}
	for _, c := range wt.cols {
		parts = append(parts, a+"."+pgx.Identifier{c}.Sanitize())
	}
	return strings.Join(parts, ", ")
}

func (w *witness) recordTable(ctx context.Context, wt *witnessed, tenant string) error {
	t := wt.t
	if _, err := w.conn.Exec(ctx, fmt.Sprintf("CREATE TEMP TABLE %s AS SELECT %s FROM %s a WITH NO DATA",
		wt.temp, wt.selectList("a"), t.rel.ident())); err != nil {
		return err
	}
	p := &predicate{}
	tag, err := w.conn.Exec(ctx, fmt.Sprintf("INSERT INTO %s SELECT %s FROM %s a WHERE %s",
		wt.temp, wt.selectList("a"), t.rel.ident(), p.gone(t, "a")), tenant)
	if err != nil {
		return err
	}
	wt.recorded = tag.RowsAffected()
	if wt.recorded > 0 {
		// The checks join on it: without statistics the planner takes a
		// temporary table for tiny and loops over the big table.
		_, err = w.conn.Exec(ctx, "ANALYZE "+wt.temp)
	}
	return err
}

// matches is the condition that row a of t is the recorded row p: its
// identity (within its relation for an inheritance tree, whose tables
// keep their keys apart; a partitioned table's key spans its partitions).
func (wt *witnessed) matches(a, p string) string {
	var conds []string
	if wt.t.rel.kind != 'p' {
		conds = append(conds, a+".tableoid = "+p+".lcd_rel")
	}
	if wt.identity == nil {
		conds = append(conds, "md5("+a+"::text) = "+p+".lcd_row")
	}
	for _, c := range wt.identity {
		id := pgx.Identifier{c}.Sanitize()
		conds = append(conds, a+"."+id+" = "+p+"."+id)
	}
	return strings.Join(conds, " AND ")
}

// check looks, after the deletes, for every recorded row that is still
// there, and for rows that reference a recorded key of a removed row
// through a key the plan followed.
func (w *witness) check(ctx context.Context) ([]sdk.ProofCheck, error) {
	var out []sdk.ProofCheck
	for _, wt := range w.tables {
		c := sdk.ProofCheck{Kind: sdk.ProofIdentities, Target: wt.t.name(), Checked: wt.recorded}
		if wt.recorded > 0 {
			q := fmt.Sprintf("SELECT count(*) FROM %s p WHERE EXISTS (SELECT 1 FROM %s a WHERE %s)", wt.temp, wt.t.rel.ident(), wt.matches("a", "p"))
			if err := w.conn.QueryRow(ctx, q).Scan(&c.Found); err != nil {
				return nil, classify(fmt.Errorf("proof: look up the rows of %s recorded before deleting: %w", wt.t.name(), err))
			}
		}
		if wt.identity == nil {
			c.Detail = "no unique key of NOT NULL columns: rows identified by their whole content"
		}
		if c.Found > 0 {
			c.Detail = strings.TrimPrefix(c.Detail+"; ", "; ") + hookHint(w.m, wt.t)
		}
		out = append(out, c)
	}
	byTable := map[*mtable]*witnessed{}
	for _, wt := range w.tables {
		byTable[wt.t] = wt
	}
	for _, e := range w.m.inbound {
		wt := byTable[e.parentT]
		if wt == nil || wt.recorded == 0 {
			continue
		}
		c := sdk.ProofCheck{Kind: sdk.ProofOrphans, Target: keyText(e) + " (" + e.fk.name + ")", Checked: wt.recorded}
		q := fmt.Sprintf("SELECT count(*) FROM %s c WHERE (%s) IN (SELECT %s FROM %s p) AND NOT EXISTS (SELECT 1 FROM %s x WHERE (%s) = (%s))",
			e.child.scan(), keyCols("c", e.fk.fkCols, e.fk.refTypes), cols("p", e.fk.refCols), wt.temp,
			e.parent.scan(), cols("x", e.fk.refCols), keyCols("c", e.fk.fkCols, e.fk.refTypes))
		if err := w.conn.QueryRow(ctx, q).Scan(&c.Found); err != nil {
			return nil, classify(fmt.Errorf("proof: look for rows referencing removed rows through %s: %w", e.fk.name, err))
		}
		if c.Found > 0 {
			c.Detail = fmt.Sprintf("rows of %s still reference rows of %s the erasure removed: the key's %s did not run", e.child.qualified(), e.parent.qualified(), actionName(e.fk))
		}
		out = append(out, c)
	}
	return out, nil
}

// swallowingHooks names the hooks of t's tree that can keep or redirect
// the rows a delete removes.
func swallowingHooks(m *model, t *mtable) []string {
	var names []string
	for _, oid := range m.cat.tree(t.rel.oid) {
		for _, h := range m.cat.rels[oid].hooks {
			if h.swallows {
				names = append(names, hookName(m.cat.rels[oid], h))
			}
		}
	}
	return names
}

// hookHint names what may have kept rows of t: its delete hooks.
func hookHint(m *model, t *mtable) string {
	names := swallowingHooks(m, t)
	if len(names) == 0 {
		return "still there after their delete"
	}
	return "still there after their delete; " + strings.Join(names, ", ") + " can keep rows"
}

// close drops the temporary tables with the connection's session state and
// hands the connection back (or closes it, if that fails).
func (w *witness) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := w.conn.Exec(ctx, "DISCARD TEMP"); err != nil {
		_ = w.conn.Conn().Close(ctx)
	}
	w.conn.Release()
}

// proofFailure is the error of a Delete whose proof found rows left.
func proofFailure(checks []sdk.ProofCheck) error {
	var parts []string
	for _, c := range checks {
		if !c.Left() {
			continue
		}
		switch c.Kind {
		case sdk.ProofIdentities:
			parts = append(parts, fmt.Sprintf("%d of the %d rows of %s recorded before the delete are %s", c.Found, c.Checked, c.Target, c.Detail))
		default:
			parts = append(parts, fmt.Sprintf("%d rows reference removed rows through %s: %s", c.Found, c.Target, c.Detail))
		}
	}
	return sdk.Permanent(fmt.Errorf("the erasure's independent proof found rows left: %s", strings.Join(parts, "; ")))
}
