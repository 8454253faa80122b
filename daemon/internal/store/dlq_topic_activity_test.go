package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
)

// Each DLQ topic says when its oldest and newest live messages came and
// how many came per hour over the last 24 hours, whatever their status;
// a message that left (deleted) no longer counts, and a topic with none
// left is not listed.
func TestTopicsSayWhenTheirDeadLettersCame(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		now := t0.Add(36*time.Hour + 40*time.Minute)
		at := func(topic string, d time.Duration, base int) {
			var batch []dlq.Incoming
			for i := 0; i < 2; i++ {
				batch = append(batch, incoming(topic, int64(base+i), `{}`))
			}
			ingest(t, s, now.Add(-d), batch...)
		}
		at("orders.dlq.v1", 30*time.Hour, 0)    // before the window
		at("orders.dlq.v1", 5*time.Hour, 10)    // 5 hours back
		at("orders.dlq.v1", 10*time.Minute, 20) // the current hour
		at("payments.dlq.v1", 2*time.Hour, 0)
		at("gone.dlq.v1", time.Hour, 0)
		for _, m := range search(t, s, dlq.SearchFilter{Topic: "gone.dlq.v1"}).Messages {
			require.NoError(t, s.DeleteDLQ(ctx, m.ID))
		}
		// A status other than PENDING still counts: the message is live.
		orders := search(t, s, dlq.SearchFilter{Topic: "orders.dlq.v1"}).Messages
		require.Len(t, orders, 6)

		got, err := s.DLQTopicActivity(ctx, now)
		require.NoError(t, err)
		require.Len(t, got, 2, "the topic whose messages all left is not listed")

		o := got["orders.dlq.v1"]
		require.True(t, o.FirstSeen.Equal(now.Add(-30*time.Hour)), "first seen %s", o.FirstSeen)
		require.True(t, o.LastSeen.Equal(now.Add(-10*time.Minute)), "last seen %s", o.LastSeen)
		require.True(t, o.ArrivalsFrom.Equal(now.Truncate(time.Hour).Add(-23*time.Hour)))
		want := make([]int64, dlq.ArrivalHours)
		want[23], want[18] = 2, 2
		require.Equal(t, want, o.Arrivals, "6 stored, 4 within the window")

		p := got["payments.dlq.v1"]
		want = make([]int64, dlq.ArrivalHours)
		want[21] = 2
		require.Equal(t, want, p.Arrivals)
		require.True(t, p.FirstSeen.Equal(p.LastSeen))

		// The newest leaves: last seen goes back to the one before.
		for _, m := range orders {
			if m.CreatedAt.Equal(now.Add(-10 * time.Minute)) {
				require.NoError(t, s.DeleteDLQ(ctx, m.ID))
			}
		}
		got, err = s.DLQTopicActivity(ctx, now)
		require.NoError(t, err)
		require.True(t, got["orders.dlq.v1"].LastSeen.Equal(now.Add(-5*time.Hour)))
		require.Equal(t, int64(0), got["orders.dlq.v1"].Arrivals[23])
	})
}
