package store_test

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
	"github.com/lifecycled/lifecycled/migrations"
)

// eachEmpty runs fn on a fresh store of each dialect that nothing has
// migrated yet, at dsn.
func eachEmpty(t *testing.T, fn func(t *testing.T, d migrations.Dialect, dsn string)) {
	for _, d := range storetest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			fn(t, d, storetest.DSN(t, d))
		})
	}
}

// driverOf names the database/sql driver that golang-migrate uses for d.
func driverOf(d migrations.Dialect) string {
	if d == migrations.Postgres {
		return "pgx"
	}
	return "sqlite"
}

func TestMigrationsStatusAndNewerSchemaRefused(t *testing.T) {
	eachEmpty(t, func(t *testing.T, d migrations.Dialect, dsn string) {
		c := ctx(t)
		st, err := store.MigrationStatus(c, d, dsn)
		require.NoError(t, err)
		require.EqualValues(t, 0, st.Current)
		require.NotEmpty(t, st.Pending)

		st, err = store.MigrateUp(c, d, dsn)
		require.NoError(t, err)
		require.Equal(t, st.Latest, st.Current)
		require.Empty(t, st.Pending)

		// Up again changes nothing.
		st2, err := store.MigrateUp(c, d, dsn)
		require.NoError(t, err)
		require.Equal(t, st, st2)

		// A newer lifecycled migrated this database: refuse to run on it.
		s, err := store.Open(c, d, dsn)
		require.NoError(t, err)
		bump := fmt.Sprintf("UPDATE %s SET version = 999", migrations.Table)
		switch x := s.(type) {
		case *store.SQLite:
			_, err = x.DB().ExecContext(c, bump)
		case *store.Postgres:
			_, err = x.Pool().Exec(c, bump)
		}
		require.NoError(t, err)
		s.Close()
		_, err = store.Open(c, d, dsn)
		require.ErrorIs(t, err, migrations.ErrSchemaNewer)
		require.ErrorContains(t, err, "version 999")
		require.ErrorContains(t, err, "upgrade lifecycled")
	})
}

// TestMigrationsGoDownAndUpAgain checks every .down.sql file against its
// .up.sql: down to nothing, then up again, on both stores.
func TestMigrationsGoDownAndUpAgain(t *testing.T) {
	eachEmpty(t, func(t *testing.T, d migrations.Dialect, dsn string) {
		c := ctx(t)
		up, err := store.MigrateUp(c, d, dsn)
		require.NoError(t, err)
		db, err := sql.Open(driverOf(d), dsn)
		require.NoError(t, err)
		defer db.Close()
		require.NoError(t, migrations.Down(d, db))
		st, err := store.MigrationStatus(c, d, dsn)
		require.NoError(t, err)
		require.EqualValues(t, 0, st.Current)
		again, err := store.MigrateUp(c, d, dsn)
		require.NoError(t, err)
		require.Equal(t, up, again)
	})
}

// The down migration keeps what the older schema can hold: a header key
// that is not UTF-8 becomes "base64:<base64>" text.
func TestIntegrityMigrationDownAndUpKeepsHeaders(t *testing.T) {
	eachEmpty(t, func(t *testing.T, d migrations.Dialect, dsn string) {
		s, err := store.Open(ctx(t), d, dsn)
		require.NoError(t, err)
		in := incoming("m.dlq.v1", 1, `{}`)
		in.Headers = []dlq.Header{{Key: []byte("bad\xff"), Value: []byte("v")}, {Key: []byte("ok"), Value: []byte("w")}}
		ingest(t, s, t0, in)
		id := onlyMessage(t, s, "m.dlq.v1").ID
		require.NoError(t, s.Close())

		db, err := sql.Open(driverOf(d), dsn)
		require.NoError(t, err)
		defer db.Close()
		// Down through the integrity migration and back up.
		steps := stepsThrough(t, d, "dlq_integrity")
		require.NoError(t, migrations.Steps(d, db, -steps))
		require.NoError(t, migrations.Steps(d, db, steps))

		s, err = store.Open(ctx(t), d, dsn)
		require.NoError(t, err)
		defer s.Close()
		m, err := s.GetDLQ(ctx(t), id)
		require.NoError(t, err)
		require.Equal(t, []dlq.Header{{Key: []byte("base64:YmFk/w=="), Value: []byte("v")}, {Key: []byte("ok"), Value: []byte("w")}}, m.Headers)
	})
}

// Rows from before digests: the latest return of a record (last_feedback)
// is carried over to the returns recorded, a message whose original topic
// was its own DLQ topic has none any more, and a re-read of their
// positions is a redelivery. Down again, of rows sharing a position (a
// topic created again) the oldest stays.
func TestDigestMigrationCarriesOverReturnsAndOriginalTopics(t *testing.T) {
	eachEmpty(t, func(t *testing.T, d migrations.Dialect, dsn string) {
		_, err := store.MigrateUp(ctx(t), d, dsn)
		require.NoError(t, err)
		db, err := sql.Open(driverOf(d), dsn)
		require.NoError(t, err)
		defer db.Close()
		// Down to just before the digest migration; the later ones come back
		// up with it.
		steps := stepsThrough(t, d, "dlq_digest_returns")
		require.NoError(t, migrations.Steps(d, db, -steps))
		table, ts := "dlq.dlq_messages", "'2026-11-01 12:00:00+00'"
		if d == migrations.SQLite {
			table, ts = "dlq_messages", fmt.Sprint(t0.UnixMicro())
		}
		for _, row := range []string{
			`'00000000-0000-0000-0000-00000000000a', 'orders.events.v1', 'orders.dlq.v1', 'kafka/orders.dlq.v1/0/5'`,
			`'00000000-0000-0000-0000-00000000000b', 'sink-dlq', 'sink-dlq', NULL`,
		} {
			_, err := db.ExecContext(ctx(t), `INSERT INTO `+table+` (id, original_topic, dlq_topic, last_feedback, error_message, status,
				created_at, updated_at, source, source_partition, source_offset, raw_payload, republished_at)
				VALUES (`+row+`, 'e', 'PENDING', `+ts+`, `+ts+`, 'kafka', 0, 0, '{}', `+ts+`)`)
			require.NoError(t, err)
		}
		require.NoError(t, migrations.Steps(d, db, steps))

		s, err := store.Open(ctx(t), d, dsn)
		require.NoError(t, err)
		defer s.Close()
		// (Raw inserts are not in PostgreSQL's per-topic counts: read by id.)
		sink, err := s.GetDLQ(ctx(t), uuid.MustParse("00000000-0000-0000-0000-00000000000b"))
		require.NoError(t, err)
		require.Equal(t, "", sink.OriginalTopic)
		require.Contains(t, sink.LastError, "no original topic")
		require.False(t, sink.IsRetryable())

		a, err := s.GetDLQ(ctx(t), uuid.MustParse("00000000-0000-0000-0000-00000000000a"))
		require.NoError(t, err)
		back := digested("orders.dlq.v1", 5, `{}`)
		back.FeedbackOf = &a.ID
		res := ingest(t, s, t0.Add(time.Hour), digested("orders.dlq.v1", 0, `{"any":1}`), back, digested("sink-dlq", 0, `{}`))
		require.Equal(t, dlq.IngestResult{Duplicates: 3}, res, "positions from before digests match any content")
		got, err := s.GetDLQ(ctx(t), a.ID)
		require.NoError(t, err)
		require.Equal(t, 0, got.RetryCount, "the return carried over is not applied again")

		// Down again: two rows at one position (a topic created again).
		res = ingest(t, s, t0.Add(time.Hour), digested("c.dlq.v1", 0, `{"old":0}`))
		require.Equal(t, 1, res.Inserted)
		res = ingest(t, s, t0.Add(2*time.Hour), digested("c.dlq.v1", 0, `{"new":0}`))
		require.Equal(t, 1, res.Inserted)
		require.NoError(t, s.Close())
		require.NoError(t, migrations.Steps(d, db, -steps))
		require.NoError(t, migrations.Steps(d, db, steps))
		s, err = store.Open(ctx(t), d, dsn)
		require.NoError(t, err)
		defer s.Close()
		require.Equal(t, []byte(`{"old":0}`), onlyMessage(t, s, "c.dlq.v1").Payload, "the oldest of a position stays")
	})
}

// stepsThrough counts the migrations from the newest back to and including
// the one whose name contains name: how far to go down to undo it.
func stepsThrough(t *testing.T, d migrations.Dialect, name string) int {
	t.Helper()
	names, err := migrations.Available(d)
	require.NoError(t, err)
	for i := len(names) - 1; i >= 0; i-- {
		if strings.Contains(names[i], name) {
			return len(names) - i
		}
	}
	t.Fatalf("no migration named like %q", name)
	return 0
}
