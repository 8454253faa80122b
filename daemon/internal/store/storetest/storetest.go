// Package storetest gives tests real state stores: a SQLite file in the
// test's temporary directory and a PostgreSQL database of their own
// (internal/testsvc), each closed and removed when the test ends. Each runs
// a test against both, so that every package that keeps state tests it on
// both dialects the same way.
package storetest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/migrations"
)

// Dialects are the state stores every test runs against.
var Dialects = []migrations.Dialect{migrations.SQLite, migrations.Postgres}

// Timeout bounds the context that Each hands a test and that Open opens
// a store with.
const Timeout = 2 * time.Minute

// DSN returns where a fresh, empty state store of dialect d is: a file
// that does not exist yet, or a database of its own.
func DSN(t testing.TB, d migrations.Dialect) string {
	t.Helper()
	if d == migrations.Postgres {
		return testsvc.PGDatabase(t)
	}
	return filepath.Join(t.TempDir(), "state.db")
}

// Open opens a fresh store of dialect d, closed when the test ends.
func Open(t testing.TB, d migrations.Dialect) store.Store {
	t.Helper()
	return OpenDSN(t, d, DSN(t, d))
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
// PostgreSQL store, as parallel subtests named after the dialect, with a
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
