// Package store is lifecycled's state store: dead letters, deletion jobs,
// Idempotency-Keys and the retention archive, behind one interface (Store)
// with one driver per database, which pass one contract suite (the
// *_test.go files, run on each through storetest.Each):
//
//   - store/postgres: PostgreSQL (pgx/v5), for one or many daemons sharing
//     the work: claims use FOR UPDATE SKIP LOCKED leases and retention
//     runs under an advisory lock.
//   - store/sqlite: SQLite (modernc.org/sqlite, pure Go), the embedded
//     default for one daemon on one VM.
//
// The Go both run is package store/sqlstore, which reaches a database
// only through its driver (sqlstore.Driver): the statements of each
// consumer interface, the same parameters in the same order on each
// database, and the operations whose Go differs, each with a Params
// struct. This package opens a store by its dialect's name, after bringing
// its schema up to date (migrations).
package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/archive"
	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/searchindex"
	"github.com/lifecycled/lifecycled/daemon/internal/idempotency"
	"github.com/lifecycled/lifecycled/daemon/internal/ledger"
	"github.com/lifecycled/lifecycled/daemon/internal/store/postgres"
	"github.com/lifecycled/lifecycled/daemon/internal/store/sqlite"
	"github.com/lifecycled/lifecycled/migrations"
)

// Store is the whole state store.
type Store interface {
	dlq.Store
	searchindex.Store
	deletion.JobStore
	idempotency.Store
	archive.Store
	ledger.Store
	deletion.ReerasureSource

	// CreateDeletionJob creates a PENDING job for tenant, or returns its
	// active one (created false); a held tenant is refused with a
	// deletion.OnHoldError. (Tests and tools; the service creates jobs with
	// CreateDeletionJobs.)
	CreateDeletionJob(ctx context.Context, tenant string, deleters []string, now time.Time) (*deletion.Job, bool, error)

	// Dialect names the implementation.
	Dialect() migrations.Dialect
	// Ping checks that the store answers.
	Ping(ctx context.Context) error
	// Close releases connections.
	Close() error
}

// Postgres is the PostgreSQL state store, as Open returns it.
type Postgres = postgres.Store

// SQLite is the embedded state store, as Open returns it.
type SQLite = sqlite.Store

var (
	_ Store = (*Postgres)(nil)
	_ Store = (*SQLite)(nil)
)

// driver is how a database's package is opened.
type driver struct {
	// openSQL opens a database/sql handle, which golang-migrate needs.
	openSQL func(dsn string) (*sql.DB, error)
	// open opens the store on a database whose schema is up to date.
	open func(ctx context.Context, dsn string) (Store, error)
}

var drivers = map[migrations.Dialect]driver{
	migrations.Postgres: {openSQL: postgres.OpenSQL, open: func(ctx context.Context, dsn string) (Store, error) {
		return postgres.Open(ctx, dsn)
	}},
	migrations.SQLite: {openSQL: sqlite.OpenSQL, open: func(ctx context.Context, dsn string) (Store, error) {
		return sqlite.Open(ctx, dsn)
	}},
}

func driverOf(dialect migrations.Dialect) (driver, error) {
	d, ok := drivers[dialect]
	if !ok {
		return driver{}, fmt.Errorf("unknown state store %q", dialect)
	}
	return d, nil
}

// Open connects to the store named by dialect and dsn and brings its schema
// up to date (refusing a schema newer than this binary).
func Open(ctx context.Context, dialect migrations.Dialect, dsn string) (Store, error) {
	d, err := driverOf(dialect)
	if err != nil {
		return nil, err
	}
	if _, err := MigrateUp(ctx, dialect, dsn); err != nil {
		return nil, err
	}
	return d.open(ctx, dsn)
}

// OpenPostgres connects, migrates and returns the PostgreSQL store.
func OpenPostgres(ctx context.Context, dsn string) (*Postgres, error) {
	s, err := Open(ctx, migrations.Postgres, dsn)
	if err != nil {
		return nil, err
	}
	return s.(*Postgres), nil
}

// OpenSQLite opens (creating if needed), migrates and returns the SQLite
// store.
func OpenSQLite(ctx context.Context, path string) (*SQLite, error) {
	s, err := Open(ctx, migrations.SQLite, path)
	if err != nil {
		return nil, err
	}
	return s.(*SQLite), nil
}

// MigrationStatus reports the schema state without changing anything.
func MigrationStatus(ctx context.Context, dialect migrations.Dialect, dsn string) (migrations.Status, error) {
	return withSQL(ctx, dialect, dsn, migrations.GetStatus)
}

// MigrateUp applies pending migrations and reports the result.
func MigrateUp(ctx context.Context, dialect migrations.Dialect, dsn string) (migrations.Status, error) {
	return withSQL(ctx, dialect, dsn, migrations.Up)
}

// withSQL runs fn on a database/sql handle to the store, which
// golang-migrate needs.
func withSQL(ctx context.Context, dialect migrations.Dialect, dsn string, fn func(migrations.Dialect, *sql.DB) (migrations.Status, error)) (migrations.Status, error) {
	d, err := driverOf(dialect)
	if err != nil {
		return migrations.Status{}, err
	}
	db, err := d.openSQL(dsn)
	if err != nil {
		return migrations.Status{}, err
	}
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return migrations.Status{}, fmt.Errorf("connect to state store: %w", err)
	}
	return fn(dialect, db)
}
