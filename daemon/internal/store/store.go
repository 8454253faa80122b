// Package store is lifecycled's state store: dead letters, deletion jobs,
// Idempotency-Keys and the retention archive, behind one interface with two
// implementations that pass one contract suite (the *_test.go files, run
// on both through storetest.Each):
//
//   - PostgreSQL (pgx/v5), for one or many daemons sharing the work: claims
//     use FOR UPDATE SKIP LOCKED leases and retention runs under an advisory
//     lock.
//   - SQLite (modernc.org/sqlite, pure Go), the embedded default for one
//     daemon on one VM.
//
// Each consumer interface has one file of SQL per dialect
// (postgres_dlq.go, sqlite_dlq.go, ...) and one file of the Go both run
// (dlq.go, ...). One adapter per dialect talks to the driver and translates
// its errors into derrors sentinels (pgError, sqliteError).
package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/archive"
	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/idempotency"
	"github.com/lifecycled/lifecycled/daemon/internal/ledger"
	"github.com/lifecycled/lifecycled/migrations"
)

// Store is the whole state store.
type Store interface {
	dlq.Store
	dlq.SearchIndexStore
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

// Open connects to the store named by dialect and dsn and brings its schema
// up to date (refusing a schema newer than this binary).
func Open(ctx context.Context, dialect migrations.Dialect, dsn string) (Store, error) {
	switch dialect {
	case migrations.Postgres:
		return OpenPostgres(ctx, dsn)
	case migrations.SQLite:
		return OpenSQLite(ctx, dsn)
	default:
		return nil, fmt.Errorf("unknown state store %q", dialect)
	}
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
	db, err := openSQL(dialect, dsn)
	if err != nil {
		return migrations.Status{}, err
	}
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return migrations.Status{}, fmt.Errorf("connect to state store: %w", err)
	}
	return fn(dialect, db)
}

func openSQL(dialect migrations.Dialect, dsn string) (*sql.DB, error) {
	switch dialect {
	case migrations.Postgres:
		return sql.Open("pgx", dsn)
	case migrations.SQLite:
		if err := ensureDir(dsn); err != nil {
			return nil, err
		}
		return sql.Open("sqlite", sqliteDSN(dsn))
	default:
		return nil, fmt.Errorf("unknown state store %q", dialect)
	}
}
