// Package postgres is the PostgreSQL driver of the state store (pgx/v5),
// for one or many daemons sharing the work: claims use FOR UPDATE SKIP
// LOCKED leases and retention runs under an advisory lock. It gives
// package sqlstore its connection (pgConn), its SQL (a file per consumer
// interface, beside the one of the Go it runs in sqlstore) and the
// operations whose Go is its own (sqlstore.Driver).
package postgres

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for migrations

	"github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"
	"github.com/lifecycled/lifecycled/migrations"
)

// Store is the PostgreSQL state store: the shared Go on this driver.
type Store struct {
	*sqlstore.Store
	pool *pgxpool.Pool
}

// Pool exposes the pool to tests and benchmarks in this module.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// driver implements sqlstore.Driver; store is the shared Go it serves,
// whose helpers (returns, outcomes, operation progress) its operations use.
type driver struct {
	store *sqlstore.Store
	conn  pgConn
	pool  *pgxpool.Pool
}

var _ sqlstore.Driver = (*driver)(nil)

var statements = sqlstore.Statements{DLQ: pgDLQ, Jobs: pgJobs, Holds: pgHolds, Receipts: pgReceipts, Keys: pgKeys,
	Retention: pgRetention, Plans: pgPlans, Ledger: pgLedger, History: pgHistory, Ops: pgOps, Search: &pgSearch, Groups: pgGroups}

// OpenSQL opens a database/sql handle on dsn, which golang-migrate needs.
func OpenSQL(dsn string) (*sql.DB, error) { return sql.Open("pgx", dsn) }

// Open connects to a database whose schema is up to date and returns the
// store.
func Open(ctx context.Context, dsn string) (*Store, error) {
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
	d := &driver{conn: pgConn{q: pool, pool: pool}, pool: pool}
	d.store = sqlstore.New(d)
	return &Store{Store: d.store, pool: pool}, nil
}

// Dialect implements sqlstore.Driver.
func (p *driver) Dialect() migrations.Dialect { return migrations.Postgres }

// Conn implements sqlstore.Driver.
func (p *driver) Conn() sqlstore.Conn { return p.conn }

// Statements implements sqlstore.Driver.
func (p *driver) Statements() *sqlstore.Statements { return &statements }

// Ping implements sqlstore.Driver.
func (p *driver) Ping(ctx context.Context) error { return pgError(p.pool.Ping(ctx)) }

// Close implements sqlstore.Driver.
func (p *driver) Close() error { p.pool.Close(); return nil }
