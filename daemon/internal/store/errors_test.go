package store_test

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/migrations"
)

func TestStoreErrorsAreSentinels(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		_, err := s.GetDLQ(ctx, uuid.New())
		require.True(t, errors.Is(err, derrors.ErrNotFound))
		require.NoError(t, s.Ping(ctx))
	})
}

// withMessage opens a fresh store of dialect d, at dsn, with one message in
// it, and a context for the test.
func withMessage(t *testing.T, d migrations.Dialect) (ctx context.Context, dsn string, s store.Store, m dlq.Message) {
	t.Helper()
	dsn = storetest.DSN(t, d)
	s = storetest.OpenDSN(t, d, dsn)
	return testsvc.Context(t, time.Minute), dsn, s, stored(t, s, "a.dlq.v1")
}

// requireUnavailable checks that err says the state store cannot serve, in
// words that name neither the database nor its user, and keeps the
// driver's error as its cause.
func requireUnavailable(t *testing.T, err error, dsn string) {
	t.Helper()
	require.ErrorIs(t, err, derrors.ErrStoreUnavailable)
	require.ErrorIs(t, err, derrors.ErrUnavailable)
	require.Contains(t, err.Error(), "state store unavailable: ")
	if u, perr := url.Parse(dsn); perr == nil && u.Scheme == "postgres" {
		require.NotContains(t, err.Error(), strings.TrimPrefix(u.Path, "/"), "the database name")
		require.NotContains(t, err.Error(), "user=")
	}
	require.NotContains(t, err.Error(), "SQLSTATE")
	var de interface{ Unwrap() []error }
	require.ErrorAs(t, err, &de)
	require.Len(t, de.Unwrap(), 2, "the sentinel and the driver's error")
}

// A PostgreSQL connection that the server ends in the middle of a statement
// (pg_terminate_backend, what an operator or a failover does) makes the
// statement fail as unavailable; the next one gets a new connection.
func TestPostgresConnectionTerminatedIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx, dsn, s, m := withMessage(t, migrations.Postgres)

	// Hold the row, so that the store's DELETE waits on it.
	holder, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT 1 FROM dlq.dlq_messages WHERE id = $1 FOR UPDATE`, m.ID)
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() { done <- s.DeleteDLQ(ctx, m.ID) }()
	admin, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer admin.Close(ctx)
	var pid int
	testsvc.Eventually(t, 20*time.Second, func() bool {
		err := admin.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()
			AND application_name = 'lifecycled' AND wait_event_type = 'Lock'`).Scan(&pid)
		return err == nil
	}, "the store's DELETE waits on the row")
	var ok bool
	require.NoError(t, admin.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, pid).Scan(&ok))
	require.True(t, ok)

	err = <-done
	requireUnavailable(t, err, dsn)
	require.NoError(t, tx.Rollback(ctx))
	_, err = s.GetDLQ(ctx, m.ID)
	require.NoError(t, err, "the message is still there, and the store serves again")
	require.NoError(t, s.DeleteDLQ(ctx, m.ID))
}

// A server that refuses connections (here: the database no longer accepts
// any) makes every call unavailable, with an error that does not name the
// database, the user or the server's words.
func TestPostgresRefusingConnectionsIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx, dsn, s, m := withMessage(t, migrations.Postgres)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	name := pgx.Identifier{strings.TrimPrefix(u.Path, "/")}.Sanitize()

	admin, err := pgx.Connect(ctx, testsvc.PGAdminDSN())
	require.NoError(t, err)
	defer admin.Close(context.Background())
	_, err = admin.Exec(ctx, `ALTER DATABASE `+name+` ALLOW_CONNECTIONS false`)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), `ALTER DATABASE `+name+` ALLOW_CONNECTIONS true`) })
	_, err = admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`,
		strings.TrimPrefix(u.Path, "/"))
	require.NoError(t, err)

	for i := 0; i < 3; i++ { // a pooled connection, then new ones
		_, err = s.GetDLQ(ctx, m.ID)
		requireUnavailable(t, err, dsn)
	}
	requireUnavailable(t, s.Ping(ctx), dsn)

	_, err = admin.Exec(ctx, `ALTER DATABASE `+name+` ALLOW_CONNECTIONS true`)
	require.NoError(t, err)
	got, err := s.GetDLQ(ctx, m.ID)
	require.NoError(t, err, "the store serves again once the server does")
	require.Equal(t, m.ID, got.ID)
}

// A closed store answers unavailable, not with the driver's words.
func TestClosedStoreIsUnavailable(t *testing.T) {
	for _, d := range storetest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			dsn := storetest.DSN(t, d)
			s := storetest.OpenDSN(t, d, dsn)
			require.NoError(t, s.Close())
			_, err := s.GetDLQ(testsvc.Context(t, time.Minute), uuid.New())
			requireUnavailable(t, err, dsn)
		})
	}
}

// A SQLite file that another process holds the write lock on (a sqlite3
// shell in a transaction, a backup tool) makes writes unavailable: at once
// when the busy timeout ends, or when the caller's deadline does.
func TestSQLiteLockedIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx, dsn, s, m := withMessage(t, migrations.SQLite)
	other, err := sql.Open("sqlite", "file:"+dsn)
	require.NoError(t, err)
	defer other.Close()
	c, err := other.Conn(ctx)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.ExecContext(ctx, `BEGIN IMMEDIATE`)
	require.NoError(t, err)
	_, err = c.ExecContext(ctx, `UPDATE dlq_messages SET error_message = 'held'`)
	require.NoError(t, err)

	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	err = s.DeleteDLQ(short, m.ID)
	requireUnavailable(t, err, dsn)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the cause is kept")

	// The store waits 10 seconds for a lock; without waiting, SQLite says busy.
	_, err = s.(*store.SQLite).DB().ExecContext(ctx, `PRAGMA busy_timeout = 0`)
	require.NoError(t, err)
	err = s.DeleteDLQ(ctx, m.ID)
	requireUnavailable(t, err, dsn)
	require.Contains(t, err.Error(), "locked")

	_, err = c.ExecContext(ctx, `ROLLBACK`)
	require.NoError(t, err)
	require.NoError(t, s.DeleteDLQ(ctx, m.ID), "the store serves again once the lock is gone")
}

// A statement that breaks a uniqueness rule is a conflict, and changes
// nothing: a deletion job that names one deleter twice.
func TestUniqueViolationIsConflict(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		_, _, err := s.CreateDeletionJob(ctx, "tenant-1", []string{"redis:sessions", "redis:sessions"}, t0)
		require.ErrorIs(t, err, derrors.ErrConflict)
		require.NotContains(t, err.Error(), "SQLSTATE")
		_, err = s.LatestDeletionJob(ctx, "tenant-1")
		require.ErrorIs(t, err, derrors.ErrNotFound, "the job was rolled back with its deleters")
	})
}
