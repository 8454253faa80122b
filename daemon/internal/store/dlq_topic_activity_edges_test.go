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

// the topic activity at the window's hour edges (one
// microsecond either side), for a RabbitMQ-style queue name with '/' and
// spaces, with archived messages (excluded from first/last seen and the
// arrivals) and a topic whose messages are all archived (not listed).
func TestTopicActivityEdges(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		now := t0.Add(36*time.Hour + 40*time.Minute)
		since := dlq.ArrivalsSince(now)
		hour := now.Truncate(time.Hour)
		const rabbit = "vhost/orders queue.dlq"
		off := int64(0)
		put := func(topic string, at time.Time) {
			off++
			ingest(t, s, at, incoming(topic, off, `{}`))
		}
		put(rabbit, since.Add(-time.Microsecond))          // before the window
		put(rabbit, since)                                 // hour 0, first instant
		put(rabbit, since.Add(time.Hour-time.Microsecond)) // hour 0, last instant
		put(rabbit, since.Add(time.Hour))                  // hour 1
		put(rabbit, hour.Add(-time.Microsecond))           // hour 22
		put(rabbit, hour)                                  // hour 23
		put(rabbit, now)                                   // hour 23

		// A topic whose messages are all resolved and archived, and one
		// whose oldest and newest are archived.
		put("gone.dlq.v1", since.Add(2*time.Hour))
		put("mixed.dlq.v1", since.Add(-48*time.Hour)) // oldest: archived below
		put("mixed.dlq.v1", since.Add(3*time.Hour))   // stays
		put("mixed.dlq.v1", since.Add(5*time.Hour))   // newest: archived below
		resolvedAt := t0.Add(-60 * 24 * time.Hour)
		resolve := func(t *testing.T, s store.Store, id uuid.UUID, at time.Time) {
			// Claimed a minute before it finishes (as TestArchiveAndPurge):
			// an UPDATE leaving updated_at as it was gets the clock's time.
			m, err := s.ClaimDLQ(ctx, id, dlq.Claim{Owner: "o", Now: at.Add(-time.Minute), LeaseUntil: at.Add(time.Hour)})
			require.NoError(t, err)
			finished(t, s, "o", at, ended(m, dlq.EventAcked))
		}
		for _, m := range search(t, s, dlq.SearchFilter{Topic: "gone.dlq.v1"}).Messages {
			resolve(t, s, m.ID, resolvedAt)
		}
		for _, m := range search(t, s, dlq.SearchFilter{Topic: "mixed.dlq.v1"}).Messages {
			if !m.CreatedAt.Equal(since.Add(3 * time.Hour)) {
				resolve(t, s, m.ID, resolvedAt)
			}
		}
		n, err := s.ArchiveDLQBatch(ctx, resolvedAt.Add(time.Second), 100)
		require.NoError(t, err)
		require.EqualValues(t, 3, n, "three archived")

		got, err := s.DLQTopicActivity(ctx, now)
		require.NoError(t, err)
		_, listed := got["gone.dlq.v1"]
		require.False(t, listed, "a topic whose messages are all archived is not listed")

		r, ok := got[rabbit]
		require.True(t, ok, "the queue with / and spaces is listed")
		require.True(t, r.FirstSeen.Equal(since.Add(-time.Microsecond)), "first seen %s", r.FirstSeen)
		require.True(t, r.LastSeen.Equal(now), "last seen %s", r.LastSeen)
		require.True(t, r.ArrivalsFrom.Equal(since))
		want := make([]int64, dlq.ArrivalHours)
		want[0], want[1], want[22], want[23] = 2, 1, 1, 2
		require.Equal(t, want, r.Arrivals, "bucketed at the hour edges")

		m := got["mixed.dlq.v1"]
		require.True(t, m.FirstSeen.Equal(since.Add(3*time.Hour)), "first seen of live messages only: %s", m.FirstSeen)
		require.True(t, m.LastSeen.Equal(since.Add(3*time.Hour)), "last seen of live messages only: %s", m.LastSeen)
		want = make([]int64, dlq.ArrivalHours)
		want[3] = 1
		require.Equal(t, want, m.Arrivals, "archived messages are not arrivals")
	})
}
