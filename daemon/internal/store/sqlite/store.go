// Package sqlite is the SQLite driver of the state store
// (modernc.org/sqlite, pure Go), the embedded default for one daemon on one
// VM. It gives package sqlstore its connection (sqliteConn), its SQL (a file
// per consumer interface, beside the one of the Go it runs in sqlstore)
// and the operations whose Go is its own (sqlstore.Driver).
package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"

	_ "modernc.org/sqlite" // database/sql driver "sqlite", pure Go

	"github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"
	"github.com/lifecycled/lifecycled/migrations"
)

// Store is the embedded state store: the shared Go on this driver. It
// serves one daemon: every statement runs on a single connection, which
// makes each transaction serial and keeps SQLITE_BUSY out of the picture;
// WAL keeps readers of the file (backups, sqlite3 shells) from blocking it.
type Store struct {
	*sqlstore.Store
	handle *sql.DB
}

// DB exposes the handle to tests in this module.
func (s *Store) DB() *sql.DB { return s.handle }

// driver implements sqlstore.Driver; store is the shared Go it serves,
// whose helpers (returns, outcomes, operation progress) its operations use.
type driver struct {
	store         *sqlstore.Store
	conn          sqliteConn
	handle        *sql.DB
	retentionLock sync.Mutex
}

var _ sqlstore.Driver = (*driver)(nil)

var statements = sqlstore.Statements{DLQ: sqliteDLQ, Jobs: sqliteJobs, Holds: sqliteHolds, Receipts: sqliteReceipts,
	Keys: sqliteKeys, Retention: sqliteRetention, Plans: sqlitePlans, Ledger: sqliteLedger, History: sqliteHistory,
	Ops: sqliteOps, Search: &sqliteSearch, Groups: sqliteGroups}

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

// OpenSQL opens a database/sql handle on the file at path (creating its
// directory), which golang-migrate needs.
func OpenSQL(path string) (*sql.DB, error) {
	if err := ensureDir(path); err != nil {
		return nil, err
	}
	return sql.Open("sqlite", sqliteDSN(path))
}

// Open opens a file whose schema is up to date and returns the store.
func Open(ctx context.Context, path string) (*Store, error) {
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
	d := &driver{conn: sqliteConn{q: db, db: db}, handle: db}
	d.store = sqlstore.New(d)
	return &Store{Store: d.store, handle: db}, nil
}

// Dialect implements sqlstore.Driver.
func (s *driver) Dialect() migrations.Dialect { return migrations.SQLite }

// Conn implements sqlstore.Driver.
func (s *driver) Conn() sqlstore.Conn { return s.conn }

// Statements implements sqlstore.Driver.
func (s *driver) Statements() *sqlstore.Statements { return &statements }

// Ping implements sqlstore.Driver.
func (s *driver) Ping(ctx context.Context) error { return sqliteError(s.handle.PingContext(ctx)) }

// Close implements sqlstore.Driver.
func (s *driver) Close() error { return s.handle.Close() }
