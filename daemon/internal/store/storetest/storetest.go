// Package storetest gives tests real state stores: a SQLite file in the
// test's temporary directory and a PostgreSQL database of their own
// (internal/testsvc), each closed and removed when the test ends. Each runs
// a test against both, so that every package that keeps state tests it on
// both dialects the same way.
package storetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/migrations"
)

// Dialects are the state stores every test runs against: both, or those
// LIFECYCLED_TEST_STORES names (a comma-separated list). make test runs
// the PostgreSQL half under the race detector and the SQLite half without
// it (the Makefile says why).
var Dialects = selectedDialects(os.Getenv("LIFECYCLED_TEST_STORES"))

func selectedDialects(list string) []migrations.Dialect {
	all := []migrations.Dialect{migrations.SQLite, migrations.Postgres}
	if strings.TrimSpace(list) == "" {
		return all
	}
	var out []migrations.Dialect
	for _, name := range strings.Split(list, ",") {
		d := migrations.Dialect(strings.TrimSpace(name))
		if !slices.Contains(all, d) {
			panic(fmt.Sprintf("LIFECYCLED_TEST_STORES: unknown state store %q (sqlite, postgres)", name))
		}
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// skipUnselected skips a test of a store LIFECYCLED_TEST_STORES leaves out.
func skipUnselected(t testing.TB, d migrations.Dialect) {
	t.Helper()
	if !slices.Contains(Dialects, d) {
		t.Skipf("the %s state store is not among LIFECYCLED_TEST_STORES", d)
	}
}

// Timeout bounds the context that Each hands a test and that Open opens
// a store with.
const Timeout = 2 * time.Minute

// DSN returns where a fresh, empty state store of dialect d is: a file
// that does not exist yet, or a database of its own.
func DSN(t testing.TB, d migrations.Dialect) string {
	t.Helper()
	skipUnselected(t, d)
	if d == migrations.Postgres {
		return testsvc.PGDatabase(t)
	}
	return filepath.Join(t.TempDir(), "state.db")
}

// Open opens a fresh store of dialect d, closed when the test ends.
func Open(t testing.TB, d migrations.Dialect) store.Store {
	t.Helper()
	skipUnselected(t, d)
	if d == migrations.SQLite {
		return OpenDSN(t, d, migratedSQLite(t))
	}
	return OpenDSN(t, d, migratedPostgres(t))
}

// pgImage is a PostgreSQL database migrated to the latest version, once
// per test process, that every store Open gives is a copy of (CREATE
// DATABASE ... TEMPLATE): the migrations were the PostgreSQL server's
// largest share of the tests' CPU.
var pgImage struct {
	once sync.Once
	name string
	err  error
}

// migratedPostgres returns the DSN of a fresh, migrated PostgreSQL
// database of the test's own: a copy of pgImage.
func migratedPostgres(t testing.TB) string {
	t.Helper()
	pgImage.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		pgImage.name, pgImage.err = testsvc.NewPGImage(ctx, func(dsn string) error {
			s, err := store.Open(ctx, migrations.Postgres, dsn)
			if err != nil {
				return err
			}
			return s.Close()
		})
	})
	if pgImage.err != nil {
		t.Fatalf("migrate the PostgreSQL state store image: %v", pgImage.err)
	}
	return testsvc.PGDatabaseFrom(t, pgImage.name)
}

// sqliteImage is a SQLite state store migrated to the latest version, once
// per test process: migrating takes about a second under the race
// detector (SQLite is C transpiled to Go, all of it instrumented), a copy
// of the file nothing.
var sqliteImage struct {
	once  sync.Once
	bytes []byte
	err   error
}

// migratedSQLite returns the path of a fresh, migrated SQLite state store
// in the test's temporary directory: a copy of sqliteImage.
func migratedSQLite(t testing.TB) string {
	t.Helper()
	sqliteImage.once.Do(func() {
		sqliteImage.bytes, sqliteImage.err = buildSQLiteImage()
	})
	if sqliteImage.err != nil {
		t.Fatalf("migrate the SQLite state store image: %v", sqliteImage.err)
	}
	path := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(path, sqliteImage.bytes, 0o600); err != nil {
		t.Fatalf("copy the SQLite state store image: %v", err)
	}
	return path
}

func buildSQLiteImage() ([]byte, error) {
	dir, err := os.MkdirTemp("", "lifecycled-sqlite-image")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "state.db")
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	s, err := store.Open(ctx, migrations.SQLite, path)
	if err != nil {
		return nil, err
	}
	if err := s.Close(); err != nil {
		return nil, err
	}
	// The last connection's close checkpoints the WAL into the file: a
	// -wal left behind would hold part of the schema.
	if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > 0 {
		return nil, fmt.Errorf("%s-wal is left with %d bytes after the close", path, fi.Size())
	}
	return os.ReadFile(path)
}

// OpenDSN opens the store at dsn (from DSN: several daemons sharing one
// database open it more than once), closed when the test ends.
func OpenDSN(t testing.TB, d migrations.Dialect, dsn string) store.Store {
	t.Helper()
	s, err := store.Open(testsvc.Context(t, Timeout), d, dsn)
	if err != nil {
		t.Fatalf("open %s state store: %v", d, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Each runs fn once against a fresh SQLite store and once against a fresh
// PostgreSQL store (those of Dialects), as parallel subtests named after the dialect, with a
// context that ends with the subtest or after Timeout.
func Each(t *testing.T, fn func(t *testing.T, ctx context.Context, s store.Store)) {
	t.Helper()
	for _, d := range Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			fn(t, testsvc.Context(t, Timeout), Open(t, d))
		})
	}
}
