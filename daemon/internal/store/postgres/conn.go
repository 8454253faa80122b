package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"
)

// redactPGError keeps passwords out of connection errors.
func redactPGError(err error) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		return errors.New("invalid connection string")
	}
	return err
}

// pgQuerier is what a pool and a transaction both have.
type pgQuerier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// pgConn is the PostgreSQL adapter (see Querier): pgx passes Go values as
// they are, and pgError translates its errors. On the pool, outside a
// transaction, a statement runs again when PostgreSQL rolled it back as a
// deadlock victim or for a serialization failure: nothing of it took
// effect, so running it again is safe. Statements that update dead letters
// can be victims when another daemon's transaction takes the per-topic
// counter rows in a different order. A transaction runs again as a whole.
type pgConn struct {
	q    pgQuerier
	pool *pgxpool.Pool // nil in a transaction
}

// again reports whether a statement that failed with err runs again: on
// the pool, after a conflict, up to five times.
func (c pgConn) again(attempt int, err error) bool {
	return c.pool != nil && attempt < 5 && rolledBack(err)
}

// rolledBack reports whether PostgreSQL rolled a statement or transaction
// back as a deadlock victim or for a serialization failure.
func rolledBack(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

func (c pgConn) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	for attempt := 0; ; attempt++ {
		tag, err := c.q.Exec(ctx, sql, args...)
		if !c.again(attempt, err) {
			return tag.RowsAffected(), pgError(err)
		}
	}
}

func (c pgConn) Query(ctx context.Context, sql string, args ...any) (sqlstore.Rows, error) {
	for attempt := 0; ; attempt++ {
		r, err := c.q.Query(ctx, sql, args...)
		if err == nil && r.Next() {
			return &pgRows{Rows: r, first: true}, nil
		}
		// A statement that changes rows returns them once it is complete:
		// a conflict shows before the first row.
		if err == nil {
			r.Close()
			err = r.Err()
		}
		if !c.again(attempt, err) {
			if err != nil {
				return nil, pgError(err)
			}
			return &pgRows{Rows: r}, nil
		}
	}
}

func (c pgConn) QueryRow(ctx context.Context, sql string, args ...any) sqlstore.Scanner {
	return pgRow{c: c, ctx: ctx, sql: sql, args: args}
}

func (c pgConn) Tx(ctx context.Context, fn func(q sqlstore.Querier) error) error {
	return c.inTx(ctx, pgx.TxOptions{}, fn)
}

func (c pgConn) Snapshot(ctx context.Context, fn func(q sqlstore.Querier) error) error {
	return c.inTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

func (c pgConn) SnapshotTx(ctx context.Context, fn func(q sqlstore.Querier) error) error {
	return c.inTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, fn)
}

func (c pgConn) inTx(ctx context.Context, opts pgx.TxOptions, fn func(q sqlstore.Querier) error) error {
	for attempt := 0; ; attempt++ {
		err := pgx.BeginTxFunc(ctx, c.pool, opts, func(tx pgx.Tx) error { return fn(pgConn{q: tx}) })
		if !c.again(attempt, err) {
			return pgError(err)
		}
	}
}

type pgRow struct {
	c    pgConn
	ctx  context.Context
	sql  string
	args []any
}

func (r pgRow) Scan(dest ...any) error {
	for attempt := 0; ; attempt++ {
		err := r.c.q.QueryRow(r.ctx, r.sql, r.args...).Scan(dest...)
		if !r.c.again(attempt, err) {
			return pgError(err)
		}
	}
}

// pgRows hands out the first row, which query read to see whether the
// statement must run again, before the rest.
type pgRows struct {
	pgx.Rows
	first bool
}

func (r *pgRows) Next() bool {
	if r.first {
		r.first = false
		return true
	}
	return r.Rows.Next()
}

func (r *pgRows) Scan(dest ...any) error { return pgError(r.Rows.Scan(dest...)) }

func (r *pgRows) Err() error { return pgError(r.Rows.Err()) }
