package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/lifecycled/lifecycled/internal/fkgraph"
	"github.com/lifecycled/lifecycled/internal/sqldelete"
	"github.com/lifecycled/lifecycled/sdk"
)

// eraser runs one Delete: the model's tables in order, in batches.
type eraser struct {
	db    *sql.DB
	m     *model
	vals  map[*logicalTable]any
	batch int
	tally *sqldelete.Tally
}

func (x *eraser) run(ctx context.Context) error {
	for _, t := range x.m.order {
		// A table with DELETE triggers: what they remove from the other
		// tables with the tenant column is counted from the tenant's rows
		// of each before and after (MySQL reports no per-table figures).
		var watched []*logicalTable
		var before, tallied []int64
		if len(t.cat.deleteTriggers) > 0 {
			watched = x.m.watchedBy(t)
			var err error
			if before, err = x.tenantCounts(ctx, watched); err != nil {
				return err
			}
			tallied = x.tallied(watched)
		}
		var err error
		if len(t.self) == 0 && len(t.cascades) == 0 {
			err = x.deleteTable(ctx, t)
		} else {
			err = x.deleteCarefully(ctx, t)
		}
		if err != nil {
			return x.explain(ctx, err)
		}
		if watched != nil {
			after, err := x.tenantCounts(ctx, watched)
			if err != nil {
				return err
			}
			// What t's own batches already counted in u (the rows its
			// cascades removed) is not the triggers' work: counted once.
			counted := x.tallied(watched)
			for i, u := range watched {
				if n := before[i] - after[i] - (counted[i] - tallied[i]); n > 0 {
					x.tally.Add(u.name(), n)
				}
			}
			x.tally.Report()
		}
	}
	// The history of a system-versioned table keeps every row deleted
	// above; system_versioned = "delete_history" (checkReached refuses
	// such a table otherwise) removes it, all of it: MariaDB has no
	// per-row form.
	for _, t := range x.m.order {
		if t.cat.versioned {
			if _, err := x.db.ExecContext(ctx, "DELETE HISTORY FROM "+t.cat.ident()); err != nil {
				return fmt.Errorf("delete the history of %s: %w", t.name(), err)
			}
		}
	}
	return nil
}

// tallied is what the tally has counted so far in each table.
func (x *eraser) tallied(tables []*logicalTable) []int64 {
	out := make([]int64, len(tables))
	for i, t := range tables {
		out[i] = x.tally.ByTable[t.name()]
	}
	return out
}

// tenantCounts counts the tenant's rows of each table: by the tenant
// column where it has one (a cascade target's rows stop matching its
// predicate once their parents are gone, not once they are), else by its
// keys to the set.
func (x *eraser) tenantCounts(ctx context.Context, tables []*logicalTable) ([]int64, error) {
	out := make([]int64, len(tables))
	for i, t := range tables {
		p := newPredicate(x.vals)
		cond := p.own(t, "a")
		if err := x.db.QueryRowContext(ctx, fmt.Sprintf("SELECT COUNT(*) FROM %s a WHERE %s", t.cat.ident(), cond), p.args...).Scan(&out[i]); err != nil {
			return nil, fmt.Errorf("count %s: %w", t.name(), err)
		}
	}
	return out, nil
}

// orderBy is the ORDER BY of a batch: the primary key, so that batches take
// rows in index order and never wait on each other's gaps.
func orderBy(t *logicalTable) string {
	if len(t.cat.pk) == 0 {
		return ""
	}
	parts := make([]string, len(t.cat.pk))
	for i, c := range t.cat.pk {
		parts[i] = quoteIdent(c)
	}
	return " ORDER BY " + strings.Join(parts, ", ")
}

// deleteTable deletes t's rows batch_size at a time, each batch one
// statement in its own transaction. MySQL's single-table DELETE takes no
// alias, so the outer table is named by itself in the condition.
func (x *eraser) deleteTable(ctx context.Context, t *logicalTable) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := newPredicate(x.vals)
		q := fmt.Sprintf("DELETE FROM %s WHERE %s%s LIMIT %d", t.cat.ident(), p.gone(t, t.cat.ident()), orderBy(t), x.batch)
		res, err := x.db.ExecContext(ctx, q, p.args...)
		if err != nil {
			return fmt.Errorf("delete from %s: %w", t.name(), err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		// Only an empty batch ends a table: a short one may mean that a
		// concurrent delete took some of the rows, and the rest are there.
		if n == 0 {
			return nil
		}
		x.tally.Add(t.name(), n)
		x.tally.Report()
	}
}

// deleteCarefully deletes a table that references itself, or whose batches
// can cascade into tables not yet emptied (a key given up in a cycle). Each
// batch picks rows that no other row references (leaves first, so no batch
// size can violate a self key), locks them, deletes them by primary key and
// counts, in the same transaction, what the cascades removed: MySQL does
// not report cascaded rows. Rows left that reference each other in a loop
// go at the end, in one transaction.
func (x *eraser) deleteCarefully(ctx context.Context, t *logicalTable) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := x.inTx(ctx, t, func(tx *sql.Tx) (int64, error) { return x.leafBatch(ctx, tx, t) })
		if err != nil {
			return fmt.Errorf("delete from %s: %w", t.name(), err)
		}
		if n == 0 {
			break
		}
	}
	p := newPredicate(x.vals)
	var left int64
	if err := x.db.QueryRowContext(ctx, fmt.Sprintf("SELECT COUNT(*) FROM %s a WHERE %s", t.cat.ident(), p.gone(t, "a")), p.args...).Scan(&left); err != nil {
		return fmt.Errorf("count %s: %w", t.name(), err)
	}
	if left == 0 {
		return nil
	}
	// What is left references itself in loops. MySQL checks keys row by
	// row, even within one statement, so the loops are cut first: in one
	// transaction, a column of each self key that allows NULL (never the
	// tenant column: that would make the rows global, or fail on the keys
	// referencing them) is set to NULL and the rows deleted. A NULL in one
	// column of a key is enough for MySQL not to check it. Nobody sees the
	// NULLs, and only this tenant's rows change (the preflight refused any
	// other row referencing them, and any loop no column can cut).
	var set []string
	for _, e := range t.self {
		for _, c := range e.fk.fkCols {
			if e.fk.nullCols[strings.ToLower(c)] && (t.tenant == nil || !strings.EqualFold(c, t.tenant.name)) {
				set = append(set, quoteIdent(c)+" = NULL")
			}
		}
	}
	if len(set) == 0 {
		return sdk.Permanent(fmt.Errorf("%s of %s reference each other in a loop through a key none of whose columns but the tenant column allows NULL: "+
			"MySQL checks keys row by row, so the loop cannot be deleted", fkgraph.Rows(left), t.name()))
	}
	_, err := x.inTx(ctx, t, func(tx *sql.Tx) (int64, error) {
		p := newPredicate(x.vals)
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("UPDATE %s SET %s WHERE %s", t.cat.ident(), strings.Join(set, ", "), p.gone(t, t.cat.ident())), p.args...); err != nil {
			return 0, err
		}
		p = newPredicate(x.vals)
		res, err := tx.ExecContext(ctx, fmt.Sprintf("DELETE FROM %s WHERE %s", t.cat.ident(), p.gone(t, t.cat.ident())), p.args...)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	})
	if err != nil {
		return fmt.Errorf("delete the rows of %s that reference each other: %w", t.name(), err)
	}
	return nil
}

// leafBatch deletes up to batch rows of t that no other row of t
// references, and returns how many it deleted directly.
func (x *eraser) leafBatch(ctx context.Context, tx *sql.Tx, t *logicalTable) (int64, error) {
	p := newPredicate(x.vals)
	cond := p.gone(t, "a")
	// A row that references itself is no leaf either: InnoDB refuses to
	// delete it through a NO ACTION key.
	for _, e := range t.self {
		c := p.alias()
		cond += fmt.Sprintf(" AND NOT EXISTS (SELECT 1 FROM %s %s WHERE (%s) = (%s))",
			t.cat.ident(), c, cols(c, e.fk.fkCols), cols("a", e.fk.refCols))
	}
	pk := cols("a", t.cat.pk)
	q := fmt.Sprintf("SELECT %s FROM %s a WHERE %s ORDER BY %s LIMIT %d FOR UPDATE", pk, t.cat.ident(), cond, pk, x.batch)
	rs, err := tx.QueryContext(ctx, q, p.args...)
	if err != nil {
		return 0, err
	}
	var keys [][]any
	for rs.Next() {
		k := make([]any, len(t.cat.pk))
		ptrs := make([]any, len(k))
		for i := range k {
			ptrs[i] = &k[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			rs.Close()
			return 0, err
		}
		for i, v := range k {
			// Bound back as text, not bytes: a binary argument would make
			// the server compare a text key as binary, without its index.
			if b, ok := v.([]byte); ok {
				k[i] = string(b)
			}
		}
		keys = append(keys, k)
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return 0, err
	}
	if len(keys) == 0 {
		return 0, nil
	}
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(t.cat.pk)), ", ") + ")"
	d := newPredicate(x.vals)
	var args []any
	for _, k := range keys {
		args = append(args, k...)
	}
	// The tenant's condition is repeated: the keys came from this
	// transaction's locked reads, but a key is never trusted alone.
	own := d.gone(t, t.cat.ident())
	q = fmt.Sprintf("DELETE FROM %s WHERE (%s) IN (%s) AND %s", t.cat.ident(), cols(t.cat.ident(), t.cat.pk),
		strings.TrimSuffix(strings.Repeat(one+", ", len(keys)), ", "), own)
	res, err := tx.ExecContext(ctx, q, append(args, d.args...)...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// inTx runs del in a transaction and adds to the tally what it removed from
// t and from the tables t's batches cascade into, read as the tenant's rows
// of each before and after (locked, so nothing else changes them between).
func (x *eraser) inTx(ctx context.Context, t *logicalTable, del func(*sql.Tx) (int64, error)) (int64, error) {
	tx, err := x.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	counted := append([]*logicalTable{t}, t.cascades...)
	var before []int64
	if len(t.cascades) > 0 {
		if before, err = x.lockedCounts(ctx, tx, counted); err != nil {
			return 0, err
		}
	}
	direct, err := del(tx)
	if err != nil {
		return 0, err
	}
	got := map[string]int64{t.name(): direct}
	if len(t.cascades) > 0 {
		after, err := x.lockedCounts(ctx, tx, counted)
		if err != nil {
			return 0, err
		}
		for i, c := range counted {
			if n := before[i] - after[i]; n > got[c.name()] {
				got[c.name()] = n
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	for name, n := range got {
		if n > 0 {
			x.tally.Add(name, n)
		}
	}
	if direct > 0 {
		x.tally.Report()
	}
	return direct, nil
}

// lockedCounts counts the tenant's rows of each table with a locking read,
// which sees the latest committed rows and this transaction's changes.
func (x *eraser) lockedCounts(ctx context.Context, tx *sql.Tx, tables []*logicalTable) ([]int64, error) {
	out := make([]int64, len(tables))
	for i, t := range tables {
		p := newPredicate(x.vals)
		q := fmt.Sprintf("SELECT COUNT(*) FROM %s a WHERE %s FOR UPDATE", t.cat.ident(), p.gone(t, "a"))
		if err := tx.QueryRowContext(ctx, q, p.args...).Scan(&out[i]); err != nil {
			return nil, fmt.Errorf("count %s: %w", t.name(), err)
		}
	}
	return out, nil
}

// fkViolation reads the constraint and referencing table out of MySQL's
// 1451 message: "Cannot delete or update a parent row: a foreign key
// constraint fails (`db`.`child`, CONSTRAINT `fk` FOREIGN KEY ...".
var fkViolation = regexp.MustCompile("\\(`((?:[^`]|``)*)`\\.`((?:[^`]|``)*)`, CONSTRAINT `((?:[^`]|``)*)`")

// explain turns a foreign key violation into an error that names the key,
// the referencing table and how many rows block, and says what was done:
// the server refused the parent's delete, so no other row changed.
func (x *eraser) explain(ctx context.Context, err error) error {
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1451 {
		return err
	}
	m := fkViolation.FindStringSubmatch(me.Message)
	if m == nil {
		return err
	}
	unq := func(s string) string { return strings.ReplaceAll(s, "``", "`") }
	child, name := tkey{unq(m[1]), unq(m[2])}, unq(m[3])
	for _, e := range x.m.inbound {
		if e.fk.name != name || e.fk.child != child || e.parentT == nil {
			continue
		}
		n, cerr := otherRowsReferencing(ctx, x.db, e, x.vals, false)
		if cerr != nil || n == 0 {
			break
		}
		return sdk.Permanent(fmt.Errorf("erasure stopped at %s: %s; the server refused that delete, so no other row changed, "+
			"and this tenant's rows in the tables deleted before it are gone (%w)", e.parent.name(), describeProblem(e, n, false), err))
	}
	return err
}
