package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lifecycled/lifecycled/internal/sqldelete"
	"github.com/lifecycled/lifecycled/sdk"
)

// eraser runs one Delete: the model's steps in order, in batches.
type eraser struct {
	pool   *pgxpool.Pool
	m      *model
	tenant string
	batch  int
	tally  *sqldelete.Tally
}

func (x *eraser) run(ctx context.Context) error {
	for _, s := range x.m.steps {
		var err error
		if len(s.tables) > 1 {
			err = x.deleteCycle(ctx, s.tables)
		} else {
			err = x.deleteTable(ctx, s.tables[0])
		}
		if err != nil {
			return x.explain(ctx, err)
		}
	}
	return nil
}

// explain turns a foreign key violation into an error that names the key,
// the referencing table and how many rows block, and says what was done:
// the database refused the parent's delete, so no other row changed.
func (x *eraser) explain(ctx context.Context, err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23503" {
		return err
	}
	for _, e := range x.m.inbound {
		if e.fk.name != pgErr.ConstraintName || e.parentT == nil {
			continue
		}
		if e.childT != nil {
			if hooks := swallowingHooks(x.m, e.childT); len(hooks) > 0 {
				return sdk.Permanent(fmt.Errorf("erasure stopped at %s: rows of %s that %s kept (acknowledged_hooks) still reference it through %s (%w)",
					e.parent.qualified(), e.child.qualified(), strings.Join(hooks, ", "), e.fk.name, err))
			}
		}
		n, cerr := otherRowsReferencing(ctx, x.pool, e, x.tenant, false)
		if cerr != nil || n == 0 {
			break
		}
		return sdk.Permanent(fmt.Errorf("erasure stopped at %s: %s; the database refused that delete, so no other row changed, "+
			"and this tenant's rows in the tables deleted before it are gone (%w)", e.parent.qualified(), describeProblem(e, n, false), err))
	}
	return err
}

// deleteTable deletes t's rows leaf by leaf (a ctid is unique only within
// one leaf, and the outer condition repeats the tenant's predicate, so a
// batch can never reach another tenant's row), batch_size rows per
// statement. With a self key, only rows no other row references are taken
// in each batch; rows that reference each other in a loop are deleted
// together in one statement at the end.
func (x *eraser) deleteTable(ctx context.Context, t *logicalTable) error {
	if t.whole {
		// Rows of t reference rows its own cascade removes: one statement,
		// so that its NO ACTION keys are checked once all of them are gone.
		p := &predicate{}
		if _, err := x.exec(ctx, t, fmt.Sprintf("DELETE FROM %s a WHERE %s", t.rel.ident(), p.own(t, "a")), true); err != nil {
			return fmt.Errorf("delete from %s in one statement: %w", t.name(), err)
		}
		return nil
	}
	p := &predicate{}
	ownA, ownB := p.own(t, "a"), p.own(t, "b")
	ready := ""
	if len(t.self) > 0 {
		ready = " AND " + p.leafReady(t, "b")
	}
	for {
		var round int64
		for _, leaf := range t.leaves {
			q := fmt.Sprintf(`DELETE FROM ONLY %[1]s a WHERE %[2]s AND a.ctid = ANY(ARRAY(
				SELECT b.ctid FROM ONLY %[1]s b WHERE %[3]s%[4]s LIMIT $2))`, leaf.ident(), ownA, ownB, ready)
			for {
				if err := ctx.Err(); err != nil {
					return err
				}
				n, err := x.exec(ctx, t, q, false)
				if err != nil {
					return fmt.Errorf("delete from %s: %w", leaf.qualified(), err)
				}
				round += n
				// Only an empty batch ends a leaf: a short one may mean
				// that a concurrent delete (an attempt being cancelled,
				// another daemon) took some of the rows this one chose,
				// and the rest are still there.
				if n == 0 {
					break
				}
			}
		}
		if len(t.self) == 0 || round == 0 {
			break
		}
	}
	if len(t.self) == 0 {
		return nil
	}
	var left int64
	if err := x.pool.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s a WHERE %s", t.rel.ident(), ownA), x.tenant).Scan(&left); err != nil {
		return fmt.Errorf("count %s: %w", t.name(), err)
	}
	if left == 0 {
		return nil
	}
	// What is left references itself in loops: one statement (keys are
	// checked at its end), with deferrable keys deferred.
	if _, err := x.exec(ctx, t, fmt.Sprintf("DELETE FROM %s a WHERE %s", t.rel.ident(), ownA), true); err != nil {
		return fmt.Errorf("delete the rows of %s that reference each other: %w", t.name(), err)
	}
	return nil
}

// exec runs one delete statement of t and counts it, with what it removed
// by cascade when t has cascades (read from the transaction's statistics,
// which see every tuple the cascade deleted).
func (x *eraser) exec(ctx context.Context, t *logicalTable, q string, deferred bool) (int64, error) {
	if len(t.cascades) == 0 && !deferred && !x.m.hooked(t) {
		var tag pgconn.CommandTag
		err := x.stoppable(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
			var err error
			tag, err = conn.Exec(ctx, q, x.tenant, x.batch)
			return err
		})
		if err != nil {
			return 0, err
		}
		n := tag.RowsAffected()
		if n > 0 {
			x.tally.Add(t.name(), n)
			x.tally.Report()
		}
		return n, nil
	}
	var direct int64
	var cascaded map[string]int64
	err := x.stoppable(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			return x.execIn(ctx, tx, t, q, deferred, &direct, &cascaded)
		})
	})
	if err != nil {
		return 0, err
	}
	if cascaded[t.name()] < direct {
		cascaded[t.name()] = direct
	}
	for name, n := range cascaded {
		x.tally.Add(name, n)
	}
	x.tally.Report()
	return direct, nil
}

// execIn runs one delete statement of t in tx and reads what it removed,
// cascades included.
func (x *eraser) execIn(ctx context.Context, tx pgx.Tx, t *logicalTable, q string, deferred bool, direct *int64, cascaded *map[string]int64) error {
	if deferred {
		if _, err := tx.Exec(ctx, "SET CONSTRAINTS ALL DEFERRED"); err != nil {
			return err
		}
	}
	args := []any{x.tenant}
	if !deferred {
		args = append(args, x.batch)
	}
	// t itself is read too: a cascade through a cycle can come back and
	// remove more of t's rows than the statement did.
	start, err := x.deletedSoFar(ctx, tx, []*logicalTable{t})
	if err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, q, args...)
	if err != nil {
		return err
	}
	*direct = tag.RowsAffected()
	*cascaded, err = x.deletedSince(ctx, tx, start)
	return err
}

// stoppable runs fn on a connection of its own with a context the
// caller's cancel does not end. When ctx ends, the statement in flight is
// cancelled on the server (a cancel request) and fn's end is awaited:
// what the statement did is then either counted (it finished first) or
// rolled back, and nothing this Delete started goes on, or commits, after
// it returned. (pgx's own cancel gives up waiting after a moment, and
// a server slow to act on the cancel then commits a batch behind the
// caller's back.) A connection a cancel request was sent on is closed,
// not reused: the request could reach its next statement.
func (x *eraser) stoppable(ctx context.Context, fn func(ctx context.Context, conn *pgxpool.Conn) error) error {
	conn, err := x.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	var (
		wg        sync.WaitGroup
		cancelled atomic.Bool
	)
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
			cancelled.Store(true)
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = conn.Conn().PgConn().CancelRequest(cctx)
		case <-done:
		}
	}()
	err = fn(context.WithoutCancel(ctx), conn)
	close(done)
	wg.Wait()
	if cancelled.Load() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = conn.Conn().Close(cctx)
		cancel()
	}
	conn.Release()
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%w (the statement in flight was stopped: %v)", ctx.Err(), err)
	}
	return err
}

// deleteCycle deletes a cycle of tables whose keys are all DEFERRABLE in
// one transaction with the keys deferred, so no order is needed. It holds
// its locks until the end: such cycles are usually small (an org and its
// owner), and there is no other way to satisfy the keys.
func (x *eraser) deleteCycle(ctx context.Context, tables []*logicalTable) error {
	var counts map[string]int64
	err := x.stoppable(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		return x.deleteCycleIn(ctx, conn, tables, &counts)
	})
	if err != nil {
		return fmt.Errorf("delete the cycle of deferrable keys: %w", err)
	}
	for name, n := range counts {
		x.tally.Add(name, n)
	}
	x.tally.Report()
	return nil
}

// deleteCycleIn is deleteCycle's transaction.
func (x *eraser) deleteCycleIn(ctx context.Context, conn *pgxpool.Conn, tables []*logicalTable, counts *map[string]int64) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET CONSTRAINTS ALL DEFERRED"); err != nil {
			return err
		}
		start, err := x.deletedSoFar(ctx, tx, tables)
		if err != nil {
			return err
		}
		for _, t := range tables {
			p := &predicate{}
			for _, leaf := range t.leaves {
				if _, err := tx.Exec(ctx, fmt.Sprintf("DELETE FROM ONLY %s a WHERE %s", leaf.ident(), p.own(t, "a")), x.tenant); err != nil {
					return fmt.Errorf("delete from %s: %w", leaf.qualified(), err)
				}
			}
		}
		*counts, err = x.deletedSince(ctx, tx, start)
		return err
	})
}

// deleted is a reading of how many rows the backend deleted from each
// table's leaves.
type deleted struct {
	oids   []int64
	owner  []string
	counts []int64
}

// deletedSoFar reads the backend's deleted-row counters for the leaves of
// the tables and of every table their cascades reach; when deleting them
// runs a trigger or rule, for every table of the database, so that what a
// trigger removed elsewhere is counted under that table's name. The
// counters include earlier transactions whose statistics the backend has
// not flushed yet, but they are not flushed inside a transaction block, so
// the difference of two readings in one transaction is exactly what the
// transaction deleted, cascades and triggers included.
func (x *eraser) deletedSoFar(ctx context.Context, tx pgx.Tx, tables []*logicalTable) (*deleted, error) {
	d := &deleted{}
	hooked := false
	seen := map[*logicalTable]bool{}
	for _, t := range tables {
		hooked = hooked || x.m.hooked(t)
		for _, u := range append([]*logicalTable{t}, t.cascades...) {
			if seen[u] {
				continue
			}
			seen[u] = true
			for _, leaf := range u.leaves {
				d.oids = append(d.oids, int64(leaf.oid))
				d.owner = append(d.owner, u.name())
			}
		}
	}
	if hooked {
		d.oids, d.owner = nil, nil
		for oid, r := range x.m.cat.rels {
			if r.kind != 'r' {
				continue
			}
			owner := x.m.cat.rels[x.m.cat.root(oid)].qualified()
			if mt := x.m.byRoot[x.m.cat.root(oid)]; mt != nil {
				owner = mt.name()
			}
			d.oids = append(d.oids, int64(oid))
			d.owner = append(d.owner, owner)
		}
	}
	var err error
	d.counts, err = readDeleted(ctx, tx, d.oids)
	return d, err
}

// deletedSince returns, per table, the rows deleted since the reading.
func (x *eraser) deletedSince(ctx context.Context, tx pgx.Tx, from *deleted) (map[string]int64, error) {
	now, err := readDeleted(ctx, tx, from.oids)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for i := range now {
		if n := now[i] - from.counts[i]; n > 0 {
			out[from.owner[i]] += n
		}
	}
	return out, nil
}

func readDeleted(ctx context.Context, tx pgx.Tx, oids []int64) ([]int64, error) {
	if len(oids) == 0 {
		return nil, nil
	}
	var counts []int64
	if err := tx.QueryRow(ctx, `SELECT array_agg(pg_stat_get_xact_tuples_deleted(o::oid) ORDER BY i)
		FROM unnest($1::int8[]) WITH ORDINALITY u(o, i)`, oids).Scan(&counts); err != nil {
		return nil, fmt.Errorf("read what the cascade deleted: %w", err)
	}
	return counts, nil
}
