package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
)

func TestArchiveAndPurge(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		// Six messages: resolved old, dead old, resolved young, pending old, retrying old, dead old.
		for i := 0; i < 6; i++ {
			ingest(t, s, t0, incoming("a.dlq.v1", int64(i), `{}`))
		}
		msgs, _, _ := s.ListDLQ(ctx, dlq.ListFilter{Topic: "a.dlq.v1", Page: 1, PageSize: 10})
		byOff := map[int64]uuid.UUID{}
		for _, m := range msgs {
			byOff[m.Position.Offset()] = m.ID
		}
		finish := func(off int64, e dlq.Event, at time.Time) {
			// Claimed a minute before it finishes, as in life: an UPDATE that
			// leaves updated_at as it was gets the trigger's clock time.
			claimAt := at.Add(-time.Minute)
			m, err := s.ClaimDLQ(ctx, byOff[off], dlq.Claim{Owner: "o", Now: claimAt, LeaseUntil: at.Add(time.Hour)})
			require.NoError(t, err)
			finished(t, s, "o", at, ended(m, e))
		}
		old := t0.Add(-31 * 24 * time.Hour)
		finish(0, dlq.EventAcked, old)
		for i := 0; i < 3; i++ {
			finish(1, dlq.EventRefused, old)
		}
		finish(2, dlq.EventAcked, t0.Add(-29*24*time.Hour))
		_, err := s.ClaimDLQ(ctx, byOff[4], dlq.Claim{Owner: "o", Now: old, LeaseUntil: t0.Add(time.Hour)})
		require.NoError(t, err)
		for i := 0; i < 3; i++ {
			finish(5, dlq.EventRefused, old)
		}

		cutoff := t0.Add(-30 * 24 * time.Hour)
		n, err := s.ArchiveDLQBatch(ctx, cutoff, 1)
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "batch size is respected")
		n, err = s.ArchiveDLQBatch(ctx, cutoff, 100)
		require.NoError(t, err)
		require.EqualValues(t, 2, n)
		n, err = s.ArchiveDLQBatch(ctx, cutoff, 100)
		require.NoError(t, err)
		require.Zero(t, n)

		left, total, err := s.ListDLQ(ctx, dlq.ListFilter{Topic: "a.dlq.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.EqualValues(t, 3, total)
		var offs []int64
		for _, m := range left {
			offs = append(offs, m.Position.Offset())
		}
		require.ElementsMatch(t, []int64{2, 3, 4}, offs, "young, PENDING and RETRYING stay")

		// Archived rows are purged after archive_retention.
		n, err = s.PurgeDLQArchiveBatch(ctx, old.Add(-time.Second), 100)
		require.NoError(t, err)
		require.Zero(t, n)
		n, err = s.PurgeDLQArchiveBatch(ctx, old.Add(time.Second), 100)
		require.NoError(t, err)
		require.EqualValues(t, 3, n)

		unlock, ok, err := s.TryRetentionLock(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		_, ok2, err := s.TryRetentionLock(ctx)
		require.NoError(t, err)
		require.False(t, ok2, "one retention pass at a time")
		unlock()
		unlock2, ok, err := s.TryRetentionLock(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		unlock2()
	})
}

// An archived position stays known: reading it again (the consumer group
// changed) is a duplicate, not a new dead letter.
func TestArchivedPositionsAreDuplicates(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		for i := int64(0); i < 3; i++ {
			ingest(t, s, t0, incoming("a.dlq.v1", i, `{}`))
		}
		msgs, _, err := s.ListDLQ(ctx, dlq.ListFilter{Topic: "a.dlq.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		for _, m := range msgs {
			resolve(t, s, m.ID, t0)
		}
		n, err := s.ArchiveDLQBatch(ctx, t0.Add(time.Second), 100)
		require.NoError(t, err)
		require.EqualValues(t, 3, n)

		res := ingest(t, s, t0.Add(time.Hour), incoming("a.dlq.v1", 0, `{}`), incoming("a.dlq.v1", 1, `{}`),
			incoming("a.dlq.v1", 2, `{}`), incoming("a.dlq.v1", 3, `{}`))
		require.Equal(t, dlq.IngestResult{Inserted: 1, Duplicates: 3}, res)
		m := onlyMessage(t, s, "a.dlq.v1")
		require.EqualValues(t, 3, m.Position.Offset())
	})
}

// A position stored twice before archived positions were known (or by a
// re-read racing an archive pass) must not fail the archive pass.
func TestArchivePassNeverFailsOnAPositionAlreadyArchived(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		ingest(t, s, t0, incoming("a.dlq.v1", 7, `{}`))
		m := onlyMessage(t, s, "a.dlq.v1")
		resolve(t, s, m.ID, t0)
		n, err := s.ArchiveDLQBatch(ctx, t0.Add(time.Second), 100)
		require.NoError(t, err)
		require.EqualValues(t, 1, n)

		// The same position again, RESOLVED, written as the old code did.
		old := t0.Add(-time.Hour)
		exec(t, s, `INSERT INTO dlq.dlq_messages (id, original_topic, error_message, status, created_at, updated_at,
				source, dlq_topic, source_position)
			VALUES ($1, 'o', 'e', 'RESOLVED', $2, $2, 'kafka', 'a.dlq.v1', $3)`,
			`INSERT INTO dlq_messages (id, original_topic, error_message, status, created_at, updated_at,
				source, dlq_topic, source_position)
			VALUES (?1, 'o', 'e', 'RESOLVED', ?2, ?2, 'kafka', 'a.dlq.v1', ?3)`, uuid.NewString(), sqlTime(s, old), m.Position.ID)
		n, err = s.ArchiveDLQBatch(ctx, t0.Add(time.Second), 100)
		require.NoError(t, err, "the archive pass does not fail on the duplicate")
		require.EqualValues(t, 1, n)
		require.Equal(t, 2, count(t, s, `SELECT count(*) FROM dlq.dlq_messages_archive WHERE source_position = (int4send(0) || int8send(7))`,
			`SELECT count(*) FROM dlq_messages_archive WHERE source_position = x'000000000000000000000007'`), "both kept")
		require.Zero(t, count(t, s, `SELECT count(*) FROM dlq.dlq_messages`, `SELECT count(*) FROM dlq_messages`))
	})
}
