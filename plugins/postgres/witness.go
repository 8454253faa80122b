package main

import (
	"context"
	"fmt"
	"slices"
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
	// folded are the tables checked inside each delete statement (see
	// foldable), by table.
	folded map[*logicalTable]*foldedTable
}

// foldedTable marks a table checked without a record (see foldable).
type foldedTable struct{}

// foldable reports whether t is checked without recording its rows'
// identities first: a table whose delete runs no hook (no trigger, no rule:
// nothing can keep a row its statement deletes, or put one back), removes
// no other table's rows by cascade and is not reached by one, has a unique
// key and no self key, and that no table outside the erasure references.
// Its rows leave by the erasure's own statements only, so once the last of
// them reaches no row, none is left; the check counts the rows its
// statements would still reach, and reads back that the session runs as an
// origin (foreign key actions on) and that the keys' triggers fire.
// Recording a million identities and looking each up again costs half the
// deletion's time; this costs one index probe per table. Every other table
// is recorded and looked up.
func (m *model) foldable(t *logicalTable) bool {
	if !t.listed || t.rel.identity == nil || len(t.self) > 0 || len(t.cascades) > 0 || t.whole || m.hooked(t) {
		return false
	}
	for _, s := range m.steps {
		if len(s.tables) > 1 && slices.Contains(s.tables, t) {
			return false
		}
	}
	for _, e := range m.inbound {
		if e.parentT == t && e.childT == nil {
			return false
		}
	}
	return true
}

// witnessed is one table's recorded identities.
type witnessed struct {
	t    *logicalTable
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
	w := &witness{conn: conn, m: m, folded: map[*logicalTable]*foldedTable{}}
	if _, err := conn.Exec(ctx, "DISCARD TEMP"); err != nil {
		w.close()
		return nil, classify(fmt.Errorf("proof: %w", err))
	}
	for i, t := range m.reached() {
		if m.foldable(t) {
			w.folded[t] = &foldedTable{}
			continue
		}
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
func (w *witness) check(ctx context.Context, tenant string, deleted map[string]int64) ([]sdk.ProofCheck, error) {
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
	folded, err := w.checkFolded(ctx, tenant, deleted)
	if err != nil {
		return nil, err
	}
	out = append(out, folded...)
	byTable := map[*logicalTable]*witnessed{}
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
func swallowingHooks(m *model, t *logicalTable) []string {
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
func hookHint(m *model, t *logicalTable) string {
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

// checkFolded is the check of the folded tables: a row their statements
// would still reach counts as left, and so does a session that does not run
// as an origin, or a key into them whose triggers are off: then a key's
// action may not have run, which is what the orphan check of a recorded
// table establishes.
func (w *witness) checkFolded(ctx context.Context, tenant string, deleted map[string]int64) ([]sdk.ProofCheck, error) {
	var out []sdk.ProofCheck
	var keys []string
	for _, t := range w.m.reached() {
		if w.folded[t] == nil {
			continue
		}
		p := &predicate{}
		c := sdk.ProofCheck{Kind: sdk.ProofIdentities, Target: t.name(), Checked: deleted[t.name()],
			Detail: "no hook runs and no cascade reaches it: rows its last statement would still reach"}
		var role string
		q := fmt.Sprintf("SELECT count(*), current_setting('session_replication_role') FROM %s a WHERE %s", t.rel.ident(), p.gone(t, "a"))
		if err := w.conn.QueryRow(ctx, q, tenant).Scan(&c.Found, &role); err != nil {
			return nil, classify(fmt.Errorf("proof: look for rows of %s its deletes still reach: %w", t.name(), err))
		}
		out = append(out, c)
		if role != "origin" {
			out = append(out, sdk.ProofCheck{Kind: sdk.ProofOrphans, Target: t.name(), Found: 1,
				Detail: "the session's session_replication_role is " + role + ", not origin: foreign key actions may not have run"})
		}
		for _, e := range w.m.inbound {
			if e.parentT == t {
				keys = append(keys, e.fk.name)
			}
		}
	}
	if len(keys) == 0 {
		return out, nil
	}
	rows, err := w.conn.Query(ctx, `
		WITH RECURSIVE tree(oid, root, depth) AS (
			SELECT c.oid, c.oid, 0 FROM pg_constraint c WHERE c.contype = 'f' AND c.conparentid = 0 AND c.conname = ANY($1)
			UNION ALL SELECT k.oid, tree.root, tree.depth + 1 FROM pg_constraint k JOIN tree ON k.conparentid = tree.oid WHERE tree.depth < 64)
		SELECT c.conname::text, count(*) FILTER (WHERE t.tgenabled NOT IN ('O', 'A'))
		FROM tree JOIN pg_constraint c ON c.oid = tree.root LEFT JOIN pg_trigger t ON t.tgconstraint = tree.oid
		GROUP BY c.conname`, keys)
	if err != nil {
		return nil, classify(fmt.Errorf("proof: read the triggers of the keys into the deleted tables: %w", err))
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var off int64
		if err := rows.Scan(&name, &off); err != nil {
			return nil, classify(err)
		}
		if off > 0 {
			out = append(out, sdk.ProofCheck{Kind: sdk.ProofOrphans, Target: name, Found: off,
				Detail: "the key's triggers are disabled now: its ON DELETE action may not have run"})
		}
	}
	return out, classify(rows.Err())
}
