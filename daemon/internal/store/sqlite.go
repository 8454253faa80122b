package store

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/uuid"
	_ "modernc.org/sqlite" // database/sql driver "sqlite", pure Go

	"github.com/lifecycled/lifecycled/migrations"
)

// SQLite is the embedded state store. It serves one daemon: every statement
// runs on a single connection, which makes each transaction serial and keeps
// SQLITE_BUSY out of the picture; WAL keeps readers of the file (backups,
// sqlite3 shells) from blocking it.
type SQLite struct {
	sqlStore
	handle        *sql.DB
	retentionLock sync.Mutex
}

var _ Store = (*SQLite)(nil)

var sqliteStatements = statements{dlq: sqliteDLQ, jobs: sqliteJobs, holds: sqliteHolds, receipts: sqliteReceipts, keys: sqliteKeys, retention: sqliteRetention, plans: sqlitePlans, ledger: sqliteLedger, history: liteHistory, ops: sqliteOps, search: &sqliteSearch, groups: sqliteGroups}

func sqliteDSN(path string) string {
	q := url.Values{}
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "foreign_keys(1)", "synchronous(NORMAL)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	return "file:" + path + "?" + q.Encode()
}

func ensureDir(file string) error {
	if file == ":memory:" {
		return nil
	}
	return os.MkdirAll(filepath.Dir(file), 0o750)
}

// OpenSQLite opens (creating if needed), migrates and returns the store.
func OpenSQLite(ctx context.Context, path string) (*SQLite, error) {
	if _, err := MigrateUp(ctx, migrations.SQLite, path); err != nil {
		return nil, err
	}
	// Dead letters hold other systems' payloads: only the daemon's user
	// reads the file (SQLite gives -wal and -shm the same mode).
	if path != ":memory:" {
		if err := os.Chmod(path, 0o600); err != nil {
			return nil, fmt.Errorf("restrict state store permissions: %w", err)
		}
	}
	db, err := sql.Open("sqlite", sqliteDSN(path))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(0)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open state store %s: %w", path, err)
	}
	return &SQLite{sqlStore: sqlStore{db: liteConn{q: db, db: db}, sql: sqliteStatements}, handle: db}, nil
}

// DB exposes the handle to tests in this module.
func (s *SQLite) DB() *sql.DB { return s.handle }

// Dialect implements Store.
func (s *SQLite) Dialect() migrations.Dialect { return migrations.SQLite }

// Ping implements Store.
func (s *SQLite) Ping(ctx context.Context) error { return sqliteError(s.handle.PingContext(ctx)) }

// Close implements Store.
func (s *SQLite) Close() error { return s.handle.Close() }

// liteQuerier is what a database handle and a transaction both have.
type liteQuerier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// liteConn is the SQLite adapter (see querier). The schema keeps times as
// microseconds since the epoch (INTEGER, which compares and sorts as the
// times do) and ids as text: liteConn passes time.Time, *time.Time and
// uuid.UUID arguments so, and reads such columns back into *time.Time and
// **time.Time, so that the statements take and give the Go values the
// PostgreSQL ones do. sqliteError translates its errors.
type liteConn struct {
	q  liteQuerier
	db *sql.DB // nil in a transaction
}

func (c liteConn) exec(ctx context.Context, query string, args ...any) (int64, error) {
	r, err := c.q.ExecContext(ctx, query, liteArgs(args)...)
	if err != nil {
		return 0, sqliteError(err)
	}
	n, err := r.RowsAffected()
	return n, sqliteError(err)
}

func (c liteConn) query(ctx context.Context, query string, args ...any) (rows, error) {
	r, err := c.q.QueryContext(ctx, query, liteArgs(args)...)
	if err != nil {
		return nil, sqliteError(err)
	}
	return liteRows{r}, nil
}

func (c liteConn) queryRow(ctx context.Context, query string, args ...any) scanner {
	return liteRow{c.q.QueryRowContext(ctx, query, liteArgs(args)...)}
}

// tx runs fn in a transaction that takes the write lock at once
// (_txlock=immediate), so that it never fails half way for a lock.
func (c liteConn) tx(ctx context.Context, fn func(q querier) error) error {
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return sqliteError(err)
	}
	if err := fn(liteConn{q: tx}); err != nil {
		_ = tx.Rollback()
		return err
	}
	return sqliteError(tx.Commit())
}

// snapshot is a transaction too: the one connection serves it alone.
func (c liteConn) snapshot(ctx context.Context, fn func(q querier) error) error { return c.tx(ctx, fn) }

// snapshotTx is tx: one writer at a time, so nothing commits beside it.
func (c liteConn) snapshotTx(ctx context.Context, fn func(q querier) error) error {
	return c.tx(ctx, fn)
}

// prepare compiles a statement that runs many times (intake's insert).
func (c liteConn) prepare(ctx context.Context, query string) (liteStmt, error) {
	st, err := c.q.PrepareContext(ctx, query)
	return liteStmt{st}, sqliteError(err)
}

type liteStmt struct{ st *sql.Stmt }

func (s liteStmt) exec(ctx context.Context, args ...any) (int64, error) {
	r, err := s.st.ExecContext(ctx, liteArgs(args)...)
	if err != nil {
		return 0, sqliteError(err)
	}
	n, err := r.RowsAffected()
	return n, sqliteError(err)
}

func (s liteStmt) close() { _ = s.st.Close() }

type liteRow struct{ r *sql.Row }

func (r liteRow) Scan(dest ...any) error { return sqliteError(r.r.Scan(liteDests(dest)...)) }

type liteRows struct{ r *sql.Rows }

func (r liteRows) Next() bool             { return r.r.Next() }
func (r liteRows) Scan(dest ...any) error { return sqliteError(r.r.Scan(liteDests(dest)...)) }
func (r liteRows) Err() error             { return sqliteError(r.r.Err()) }
func (r liteRows) Close()                 { _ = r.r.Close() }

func liteArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case time.Time:
			out[i] = v.UnixMicro()
		case *time.Time:
			if v != nil {
				out[i] = v.UnixMicro()
			}
		case uuid.UUID:
			out[i] = v.String()
		default:
			out[i] = a
		}
	}
	return out
}

func liteDests(dest []any) []any {
	out := make([]any, len(dest))
	for i, d := range dest {
		switch p := d.(type) {
		case *time.Time:
			out[i] = microTime{p}
		case **time.Time:
			out[i] = nullMicroTime{p}
		default:
			out[i] = d
		}
	}
	return out
}

// microTime reads a time stored as microseconds since the epoch.
type microTime struct{ t *time.Time }

func (m microTime) Scan(src any) error {
	v, ok := src.(int64)
	if !ok {
		return fmt.Errorf("read a time: the column holds %T, not microseconds", src)
	}
	*m.t = time.UnixMicro(v).UTC()
	return nil
}

// nullMicroTime is microTime for a column that may be NULL.
type nullMicroTime struct{ t **time.Time }

func (m nullMicroTime) Scan(src any) error {
	if src == nil {
		*m.t = nil
		return nil
	}
	t := new(time.Time)
	if err := (microTime{t}).Scan(src); err != nil {
		return err
	}
	*m.t = t
	return nil
}
