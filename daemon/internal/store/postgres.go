package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for migrations

	"github.com/lifecycled/lifecycled/migrations"
)

// Postgres is the PostgreSQL state store.
type Postgres struct {
	sqlStore
	pool *pgxpool.Pool
}

var _ Store = (*Postgres)(nil)

var pgStatements = statements{dlq: pgDLQ, jobs: pgJobs, holds: pgHolds, receipts: pgReceipts, keys: pgKeys, retention: pgRetention, plans: pgPlans, ledger: pgLedger, history: pgHistory, ops: pgOps, search: &pgSearch, groups: pgGroups}

// OpenPostgres connects, migrates and returns the store.
func OpenPostgres(ctx context.Context, dsn string) (*Postgres, error) {
	if _, err := MigrateUp(ctx, migrations.Postgres, dsn); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse state store DSN: %w", redactPGError(err))
	}
	if cfg.MaxConns < 8 {
		cfg.MaxConns = 8
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "lifecycled"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to state store: %w", redactPGError(err))
	}
	return &Postgres{sqlStore: sqlStore{db: pgConn{q: pool, pool: pool}, sql: pgStatements}, pool: pool}, nil
}

// Pool exposes the pool to tests and benchmarks in this module.
func (p *Postgres) Pool() *pgxpool.Pool { return p.pool }

// Dialect implements Store.
func (p *Postgres) Dialect() migrations.Dialect { return migrations.Postgres }

// Ping implements Store.
func (p *Postgres) Ping(ctx context.Context) error { return pgError(p.pool.Ping(ctx)) }

// Close implements Store.
func (p *Postgres) Close() error { p.pool.Close(); return nil }

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

// pgConn is the PostgreSQL adapter (see querier): pgx passes Go values as
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

func (c pgConn) exec(ctx context.Context, sql string, args ...any) (int64, error) {
	for attempt := 0; ; attempt++ {
		tag, err := c.q.Exec(ctx, sql, args...)
		if !c.again(attempt, err) {
			return tag.RowsAffected(), pgError(err)
		}
	}
}

func (c pgConn) query(ctx context.Context, sql string, args ...any) (rows, error) {
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

func (c pgConn) queryRow(ctx context.Context, sql string, args ...any) scanner {
	return pgRow{c: c, ctx: ctx, sql: sql, args: args}
}

func (c pgConn) tx(ctx context.Context, fn func(q querier) error) error {
	return c.inTx(ctx, pgx.TxOptions{}, fn)
}

func (c pgConn) snapshot(ctx context.Context, fn func(q querier) error) error {
	return c.inTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

func (c pgConn) snapshotTx(ctx context.Context, fn func(q querier) error) error {
	return c.inTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, fn)
}

func (c pgConn) inTx(ctx context.Context, opts pgx.TxOptions, fn func(q querier) error) error {
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
