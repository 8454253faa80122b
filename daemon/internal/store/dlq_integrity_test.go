package store_test

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/migrations"
)

// exec runs raw SQL against either store, for states the store's own
// methods cannot produce (rows from before a fix).
func exec(t *testing.T, s store.Store, pg, lite string, args ...any) {
	t.Helper()
	var err error
	switch x := s.(type) {
	case *store.Postgres:
		_, err = x.Pool().Exec(ctx(t), pg, args...)
	case *store.SQLite:
		_, err = x.DB().ExecContext(ctx(t), lite, args...)
	}
	require.NoError(t, err)
}

func count(t *testing.T, s store.Store, pg, lite string) int {
	t.Helper()
	var n int
	var err error
	switch x := s.(type) {
	case *store.Postgres:
		err = x.Pool().QueryRow(ctx(t), pg).Scan(&n)
	case *store.SQLite:
		err = x.DB().QueryRowContext(ctx(t), lite).Scan(&n)
	}
	require.NoError(t, err)
	return n
}

func resolve(t *testing.T, s store.Store, id uuid.UUID, at time.Time) {
	t.Helper()
	_, err := s.ClaimDLQ(ctx(t), id, dlq.Claim{Owner: "d", Now: at, LeaseUntil: at.Add(time.Minute)})
	require.NoError(t, err)
	require.NoError(t, s.FinishDLQ(ctx(t), "d", at, []dlq.Outcome{{ID: id, Acked: true,
		Attempt: &dlq.Attempt{At: at, Outcome: dlq.OutcomeResolved, Trigger: dlq.TriggerManual}}}))
}

func TestKeysAndHeadersAreStoredAsBytes(t *testing.T) {
	contract(t, func(t *testing.T, s store.Store) {
		headers := []dlq.Header{
			{Key: []byte("bad\xffkey"), Value: []byte("v\xfe")},
			{Key: []byte("nul\x00"), Value: []byte{0}},
			{Key: []byte{}, Value: []byte{}},
			{Key: []byte("error"), Value: []byte("e")},
		}
		keys := map[int64][]byte{1: nil, 2: {}, 3: {0, 0xff, 1}}
		for off, key := range keys {
			in := incoming("b.dlq.v1", off, "")
			in.Key, in.Headers = key, headers
			ingest(t, s, t0, in)
		}
		msgs, _, err := s.ListDLQ(ctx(t), dlq.ListFilter{Topic: "b.dlq.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.Len(t, msgs, 3)
		for _, m := range msgs {
			want := keys[m.Position.Offset]
			require.Equal(t, want, m.Key, "offset %d", m.Position.Offset)
			require.Equal(t, want == nil, m.Key == nil, "no key and an empty key differ")
			require.Equal(t, headers, m.Headers)
			require.NotNil(t, m.Payload, "an empty payload is not a missing one")
			require.False(t, m.Truncated())
		}

		// A row written before keys were bytes (key as JSON text) reads the same.
		exec(t, s, `UPDATE dlq.dlq_messages SET headers = convert_to('[{"key":"legacy","value":"dg=="}]', 'UTF8')`,
			`UPDATE dlq_messages SET headers = '[{"key":"legacy","value":"dg=="}]'`)
		m, err := s.GetDLQ(ctx(t), msgs[0].ID)
		require.NoError(t, err)
		require.Equal(t, []dlq.Header{{Key: []byte("legacy"), Value: []byte("v")}}, m.Headers)
	})
}

// An x-dlq-id updates a record only for our own replay: the record exists,
// was republished (acknowledged), and the message came back on the
// record's source and DLQ topic. Anything else is a new dead letter, and
// the record named does not change at all.
func TestFeedbackOnlyForOurOwnReplays(t *testing.T) {
	contract(t, func(t *testing.T, s store.Store) {
		ingest(t, s, t0, incoming("orders.dlq.v1", 1, `{"n":1}`), incoming("orders.dlq.v1", 2, `{"n":2}`))
		msgs, _, err := s.ListDLQ(ctx(t), dlq.ListFilter{Topic: "orders.dlq.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		byOff := map[int64]uuid.UUID{}
		for _, m := range msgs {
			byOff[m.Position.Offset] = m.ID
		}
		republished, never := byOff[1], byOff[2]
		resolve(t, s, republished, t0)
		snapshot := func() (*dlq.Message, *dlq.Message) {
			a, err := s.GetDLQ(ctx(t), republished)
			require.NoError(t, err)
			b, err := s.GetDLQ(ctx(t), never)
			require.NoError(t, err)
			return a, b
		}
		beforeA, beforeB := snapshot()
		require.NotNil(t, beforeA.RepublishedAt)

		copied := func(topic, source string, off int64, of uuid.UUID) dlq.Incoming {
			in := incoming(topic, off, `{}`)
			in.Position.Source, in.FeedbackOf, in.ErrorMessage = source, &of, "copied header"
			return in
		}
		opts := dlq.IngestOptions{Now: t0.Add(time.Hour), MaxRetries: 3}
		res, err := s.IngestDLQ(ctx(t), []dlq.Incoming{
			copied("billing.dlq.v1", "kafka", 1, republished),  // another DLQ topic
			copied("orders.dlq.v1", "kafka-2", 3, republished), // another source
			copied("orders.dlq.v1", "kafka", 4, never),         // never republished
		}, opts)
		require.NoError(t, err)
		require.Equal(t, dlq.IngestResult{Inserted: 3}, res)
		afterA, afterB := snapshot()
		require.Equal(t, beforeA, afterA, "the republished record did not change")
		require.Equal(t, beforeB, afterB, "the never republished record did not change")
		b := onlyMessage(t, s, "billing.dlq.v1")
		require.Equal(t, "copied header", b.ErrorMessage)
		require.Equal(t, dlq.StatusPending, b.Status)

		// Our own replay, back on its topic: the record is updated.
		back := copied("orders.dlq.v1", "kafka", 5, republished)
		back.ErrorMessage = "failed again"
		res, err = s.IngestDLQ(ctx(t), []dlq.Incoming{back}, opts)
		require.NoError(t, err)
		require.Equal(t, dlq.IngestResult{Feedback: 1}, res)
		got, err := s.GetDLQ(ctx(t), republished)
		require.NoError(t, err)
		require.Equal(t, dlq.StatusPending, got.Status)
		require.Equal(t, 1, got.RetryCount)
		require.Equal(t, "failed again", got.ErrorMessage)
		require.Contains(t, got.LastError, "came back to orders.dlq.v1 (partition 0, offset 5): failed again")
		require.Len(t, got.Attempts, 2)
		require.Equal(t, dlq.OutcomeResolved, got.Attempts[0].Outcome)
		require.Equal(t, dlq.OutcomeReturned, got.Attempts[1].Outcome)
	})
}

// An archived position stays known: reading it again (the consumer group
// changed) is a duplicate, not a new dead letter.
func TestArchivedPositionsAreDuplicates(t *testing.T) {
	contract(t, func(t *testing.T, s store.Store) {
		for i := int64(0); i < 3; i++ {
			ingest(t, s, t0, incoming("a.dlq.v1", i, `{}`))
		}
		msgs, _, err := s.ListDLQ(ctx(t), dlq.ListFilter{Topic: "a.dlq.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		for _, m := range msgs {
			resolve(t, s, m.ID, t0)
		}
		n, err := s.ArchiveDLQBatch(ctx(t), t0.Add(time.Second), 100)
		require.NoError(t, err)
		require.EqualValues(t, 3, n)

		res := ingest(t, s, t0.Add(time.Hour), incoming("a.dlq.v1", 0, `{}`), incoming("a.dlq.v1", 1, `{}`),
			incoming("a.dlq.v1", 2, `{}`), incoming("a.dlq.v1", 3, `{}`))
		require.Equal(t, dlq.IngestResult{Inserted: 1, Duplicates: 3}, res)
		m := onlyMessage(t, s, "a.dlq.v1")
		require.EqualValues(t, 3, m.Position.Offset)
	})
}

// A position stored twice before archived positions were known (or by a
// re-read racing an archive pass) must not fail the archive pass.
func TestArchivePassNeverFailsOnAPositionAlreadyArchived(t *testing.T) {
	contract(t, func(t *testing.T, s store.Store) {
		ingest(t, s, t0, incoming("a.dlq.v1", 7, `{}`))
		m := onlyMessage(t, s, "a.dlq.v1")
		resolve(t, s, m.ID, t0)
		n, err := s.ArchiveDLQBatch(ctx(t), t0.Add(time.Second), 100)
		require.NoError(t, err)
		require.EqualValues(t, 1, n)

		// The same position again, RESOLVED, written as the old code did.
		old := t0.Add(-time.Hour)
		exec(t, s, `INSERT INTO dlq.dlq_messages (id, original_topic, error_message, status, created_at, updated_at,
				source, dlq_topic, source_partition, source_offset)
			VALUES ($1, 'o', 'e', 'RESOLVED', $2, $2, 'kafka', 'a.dlq.v1', 0, 7)`,
			`INSERT INTO dlq_messages (id, original_topic, error_message, status, created_at, updated_at,
				source, dlq_topic, source_partition, source_offset)
			VALUES (?1, 'o', 'e', 'RESOLVED', ?2, ?2, 'kafka', 'a.dlq.v1', 0, 7)`, uuid.NewString(), pgOrMicros(s, old))
		n, err = s.ArchiveDLQBatch(ctx(t), t0.Add(time.Second), 100)
		require.NoError(t, err, "the archive pass does not fail on the duplicate")
		require.EqualValues(t, 1, n)
		require.Equal(t, 2, count(t, s, `SELECT count(*) FROM dlq.dlq_messages_archive WHERE source_offset = 7`,
			`SELECT count(*) FROM dlq_messages_archive WHERE source_offset = 7`), "both kept")
		require.Zero(t, count(t, s, `SELECT count(*) FROM dlq.dlq_messages`, `SELECT count(*) FROM dlq_messages`))
	})
}

func pgOrMicros(s store.Store, t time.Time) any {
	if s.Dialect() == migrations.SQLite {
		return t.UnixMicro()
	}
	return t
}

// New messages each get their own first retry time.
func TestFirstRetryTimeIsDrawnPerMessage(t *testing.T) {
	contract(t, func(t *testing.T, s store.Store) {
		i := 0
		opts := dlq.IngestOptions{Now: t0, MaxRetries: 3, FirstRetryAt: func() *time.Time {
			i++
			at := t0.Add(time.Duration(i) * time.Second)
			return &at
		}}
		_, err := s.IngestDLQ(ctx(t), []dlq.Incoming{incoming("j.dlq.v1", 0, `{}`), incoming("j.dlq.v1", 1, `{}`), incoming("j.dlq.v1", 2, `{}`)}, opts)
		require.NoError(t, err)
		msgs, _, err := s.ListDLQ(ctx(t), dlq.ListFilter{Topic: "j.dlq.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		seen := map[time.Time]bool{}
		for _, m := range msgs {
			seen[m.NextRetryAt.UTC()] = true
		}
		require.Len(t, seen, 3, "three messages, three times")
	})
}

// The down migration keeps what the older schema can hold: a header key
// that is not UTF-8 becomes "base64:<base64>" text.
func TestIntegrityMigrationDownAndUpKeepsHeaders(t *testing.T) {
	for _, d := range []migrations.Dialect{migrations.SQLite, migrations.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			dsn := filepath.Join(t.TempDir(), "state.db")
			driver, sqlDSN := "sqlite", dsn
			if d == migrations.Postgres {
				dsn = testsvc.PGDatabase(t)
				driver, sqlDSN = "pgx", dsn
			}
			s, err := store.Open(ctx(t), d, dsn)
			require.NoError(t, err)
			in := incoming("m.dlq.v1", 1, `{}`)
			in.Headers = []dlq.Header{{Key: []byte("bad\xff"), Value: []byte("v")}, {Key: []byte("ok"), Value: []byte("w")}}
			ingest(t, s, t0, in)
			id := onlyMessage(t, s, "m.dlq.v1").ID
			require.NoError(t, s.Close())

			db, err := sql.Open(driver, sqlDSN)
			require.NoError(t, err)
			defer db.Close()
			require.NoError(t, migrations.Steps(d, db, -1))
			require.NoError(t, migrations.Steps(d, db, 1))

			s, err = store.Open(ctx(t), d, dsn)
			require.NoError(t, err)
			defer s.Close()
			m, err := s.GetDLQ(ctx(t), id)
			require.NoError(t, err)
			require.Equal(t, []dlq.Header{{Key: []byte("base64:YmFk/w=="), Value: []byte("v")}, {Key: []byte("ok"), Value: []byte("w")}}, m.Headers)
		})
	}
}
