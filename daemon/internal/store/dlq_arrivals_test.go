package store_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
)

// arrivalsDrift is how many (hour, DLQ topic, failure group) counters
// differ from a count of the live messages themselves, either way.
func arrivalsDrift(t *testing.T, s store.Store) int {
	t.Helper()
	return count(t, s, `
		WITH truth AS (
			SELECT to_timestamp(floor(extract(epoch FROM created_at) / 3600) * 3600) AS hour, dlq_topic, failure_group, count(*) AS n
			FROM dlq.dlq_messages GROUP BY 1, 2, 3
		), kept AS (SELECT hour, dlq_topic, failure_group, n FROM dlq.dlq_arrivals WHERE n <> 0)
		SELECT (SELECT count(*) FROM (SELECT * FROM truth EXCEPT SELECT * FROM kept) a)
			+ (SELECT count(*) FROM (SELECT * FROM kept EXCEPT SELECT * FROM truth) b)`, `
		WITH truth AS (
			SELECT created_at - created_at % 3600000000 AS hour, dlq_topic, failure_group, count(*) AS n
			FROM dlq_messages GROUP BY 1, 2, 3
		), kept AS (SELECT hour, dlq_topic, failure_group, n FROM dlq_arrivals WHERE n <> 0)
		SELECT (SELECT count(*) FROM (SELECT * FROM truth EXCEPT SELECT * FROM kept))
			+ (SELECT count(*) FROM (SELECT * FROM kept EXCEPT SELECT * FROM truth))`)
}

// The arrivals the topics list and the groups list read are counters
// (migration 026), not counts of the messages: after every change a
// message can go through (stored in batches over several hours, a
// redelivery, deleted, archived, regrouped by the backfill) they agree
// with a count of the live messages, hour by hour, on both dialects; a
// message whose hour is no longer counted changes no counter when it goes.
func TestArrivalsCountersFollowEveryChange(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		now := t0.Add(36*time.Hour + 40*time.Minute)
		off := int64(0)
		put := func(topic string, at time.Time, n int) {
			var batch []dlq.Incoming
			for i := 0; i < n; i++ {
				off++
				in := incoming(topic, off, `{}`)
				in.ErrorMessage = []string{"connection refused", "timeout after 5s", "bad payload"}[off%3]
				batch = append(batch, in)
			}
			ingest(t, s, at, batch...)
		}
		put("orders.dlq.v1", now.Add(-30*time.Hour), 3)
		put("orders.dlq.v1", now.Add(-5*time.Hour), 4)
		put("orders.dlq.v1", now.Add(-10*time.Minute), 5)
		put("payments.dlq.v1", now.Add(-2*time.Hour), 6)
		put("gone.dlq.v1", now.Add(-time.Hour), 2)
		require.Zero(t, arrivalsDrift(t, s), "after intake")
		// A redelivery is stored once and counted once.
		ingest(t, s, now, incoming("orders.dlq.v1", 1, `{}`))
		require.Zero(t, arrivalsDrift(t, s), "after a redelivery")

		// The topics' and the groups' windows read the counters.
		activity, err := s.DLQTopicActivity(ctx, now)
		require.NoError(t, err)
		want := make([]int64, dlq.ArrivalHours)
		want[18], want[23] = 4, 5
		require.Equal(t, want, activity["orders.dlq.v1"].Arrivals)
		// Each failure group spans the topics its error came through: the
		// groups' arrivals add up to the topics'.
		groupsTotal := func() (total int64) {
			groups, err := s.DLQGroups(ctx, dlq.GroupFilter{Now: now, Limit: 50})
			require.NoError(t, err)
			for _, g := range groups {
				require.NotEmpty(t, g.ID)
				for _, n := range g.Arrivals {
					total += n
				}
			}
			return total
		}
		require.EqualValues(t, 9+6+2, groupsTotal(), "the groups' arrivals add up to the topics'")

		// Deleted, and resolved then archived: off their counters.
		gone := search(t, s, dlq.SearchFilter{Topic: "gone.dlq.v1"}).Messages
		require.NoError(t, s.DeleteDLQ(ctx, gone[0].ID))
		require.Zero(t, arrivalsDrift(t, s), "after a delete")
		resolvedAt := t0.Add(-60 * 24 * time.Hour)
		for _, m := range search(t, s, dlq.SearchFilter{Topic: "payments.dlq.v1"}).Messages[:4] {
			c, err := s.ClaimDLQ(ctx, m.ID, dlq.Claim{Owner: "o", Now: resolvedAt.Add(-time.Minute), LeaseUntil: resolvedAt.Add(time.Hour)})
			require.NoError(t, err)
			finished(t, s, "o", resolvedAt, ended(c, dlq.EventAcked))
		}
		n, err := s.ArchiveDLQBatch(ctx, resolvedAt.Add(time.Second), 100)
		require.NoError(t, err)
		require.EqualValues(t, 4, n)
		require.Zero(t, arrivalsDrift(t, s), "after the archive")
		activity, err = s.DLQTopicActivity(ctx, now)
		require.NoError(t, err)
		want = make([]int64, dlq.ArrivalHours)
		want[21] = 2
		require.Equal(t, want, activity["payments.dlq.v1"].Arrivals, "archived messages are not arrivals")

		// Messages from before failure groups (group ''), then given theirs
		// by the backfill: the counters move with them.
		exec(t, s, `UPDATE dlq.dlq_messages SET failure_group = '' WHERE dlq_topic = 'orders.dlq.v1'`,
			`UPDATE dlq_messages SET failure_group = '' WHERE dlq_topic = 'orders.dlq.v1'`)
		require.Zero(t, arrivalsDrift(t, s), "after the groups were taken away")
		for {
			n, err := s.BackfillDLQGroups(ctx, 5)
			require.NoError(t, err)
			if n == 0 {
				break
			}
		}
		require.Zero(t, arrivalsDrift(t, s), "after the backfill")
		require.EqualValues(t, 9+2+1, groupsTotal(), "one of gone's deleted, four of payments' archived")

		// The retention pass drops the counters of hours before its cutoff;
		// a message of such an hour then goes without touching any counter.
		_, err = s.ArchiveDLQBatch(ctx, now.Add(-24*time.Hour), 100)
		require.NoError(t, err)
		require.Zero(t, count(t, s, `SELECT count(*)::int FROM dlq.dlq_arrivals WHERE hour < '`+now.Add(-24*time.Hour).Format(time.RFC3339Nano)+`'`,
			`SELECT count(*) FROM dlq_arrivals WHERE hour < `+strconv.FormatInt(now.Add(-24*time.Hour).UnixMicro(), 10)), "old hours dropped")
		before := count(t, s, `SELECT count(*)::int FROM dlq.dlq_arrivals`, `SELECT count(*) FROM dlq_arrivals`)
		old := search(t, s, dlq.SearchFilter{Topic: "orders.dlq.v1", Until: new(now.Add(-24 * time.Hour))}).Messages
		require.Len(t, old, 3)
		require.NoError(t, s.DeleteDLQ(ctx, old[0].ID))
		require.Equal(t, before, count(t, s, `SELECT count(*)::int FROM dlq.dlq_arrivals`, `SELECT count(*) FROM dlq_arrivals`),
			"no counter written for an hour no longer counted")
		activity, err = s.DLQTopicActivity(ctx, now)
		require.NoError(t, err)
		want = make([]int64, dlq.ArrivalHours)
		want[18], want[23] = 4, 5
		require.Equal(t, want, activity["orders.dlq.v1"].Arrivals)
	})
}
