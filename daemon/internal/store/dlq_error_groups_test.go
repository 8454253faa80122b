package store_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
)

// outageFixture stores one outage (the database refuses connections) seen
// through three sources, each with its own DLQ topic, original topic and
// exception class (the table's jobs have none), and beside it failures of
// other kinds on the same topics. It returns the ids of the outage's
// messages.
func outageFixture(t *testing.T, s store.Store) map[string]bool {
	t.Helper()
	type src struct{ source, topic, original, class string }
	sources := []src{
		{"kafka", "orders.dlq.v1", "orders.events.v1", "java.net.ConnectException"},
		{"rabbitmq:orders", "orders:dlq", "orders/order.created", "org.postgresql.util.PSQLException"},
		{"pgtable:bookmarks", "failed_jobs", "http://reprocess/v1/bookmarks/{bookmark_id}/reprocess", ""},
	}
	var batch []dlq.Incoming
	for i, sc := range sources {
		for j := 0; j < 4; j++ {
			in := incoming(sc.topic, int64(j), fmt.Sprintf(`{"n":%d}`, j))
			in.Position = dlq.Position{Source: sc.source, Topic: sc.topic, ID: []byte{byte(i), byte(j)}, Display: fmt.Sprintf("#%d", j)}
			in.OriginalTopic = sc.original
			in.Origin.ErrorClass = sc.class
			in.ErrorMessage = fmt.Sprintf("Connection refused: db-%d:5432", j)
			if j == 3 {
				in.ErrorMessage = "HTTP 404 Not Found"
			}
			batch = append(batch, in)
		}
	}
	ingest(t, s, t0, batch...)
	outage := map[string]bool{}
	for _, m := range search(t, s, dlq.SearchFilter{Error: "refused"}).Messages {
		outage[m.ID.String()] = true
	}
	require.Len(t, outage, 9)
	return outage
}

func errorGroups(t *testing.T, s store.Store, f dlq.GroupFilter) []dlq.GroupSummary {
	t.Helper()
	f.By, f.Sort, f.Limit = dlq.GroupByError, dlq.GroupsByCount, 50
	gs, err := s.DLQGroups(ctx(t), f)
	require.NoError(t, err)
	return gs
}

func TestErrorGroupsSpanSourcesTopicsAndClasses(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		outage := outageFixture(t, s)

		// By failure: one group per original topic and class.
		fgs, err := s.DLQGroups(ctx, dlq.GroupFilter{Sort: dlq.GroupsByCount, Limit: 50})
		require.NoError(t, err)
		require.Len(t, fgs, 6, "the outage on three destinations, and three 404s")
		var members []string
		for _, g := range fgs[:3] {
			require.Equal(t, "Connection refused: db-<n>:<n>", g.Pattern)
			require.Equal(t, []string{g.ID}, g.Members, "a failure group spans itself")
			require.Equal(t, fgs[0].ErrorGroup, g.ErrorGroup)
			members = append(members, g.ID)
		}
		sort.Strings(members)

		// By error: the outage is one row across the three sources.
		gs := errorGroups(t, s, dlq.GroupFilter{})
		require.Len(t, gs, 2, "the outage, and the 404s")
		g := gs[0]
		require.Equal(t, dlq.ErrorGroupID("Connection refused: db-<n>:<n>"), g.ID)
		require.Equal(t, g.ID, g.ErrorGroup)
		require.Equal(t, "Connection refused: db-<n>:<n>", g.Pattern)
		require.Empty(t, g.ExceptionClass)
		require.Equal(t, members, g.Members)
		require.Equal(t, []string{"java.net.ConnectException", "org.postgresql.util.PSQLException"}, g.ExceptionClasses)
		require.Equal(t, []string{"failed_jobs", "orders.dlq.v1", "orders:dlq"}, g.DLQTopics)
		require.Len(t, g.OriginalTopics, 3)
		require.EqualValues(t, 9, g.Counts[dlq.StatusPending])
		require.True(t, g.FirstSeen.Equal(t0) && g.LastSeen.Equal(t0))
		require.Contains(t, g.SampleError, "Connection refused: db-")

		// Searching by the error group finds the outage and nothing else,
		// alone (the counters' total) and with other filters.
		p := search(t, s, dlq.SearchFilter{ErrorGroup: g.ID})
		require.EqualValues(t, 9, p.Total)
		got := map[string]bool{}
		for _, m := range p.Messages {
			got[m.ID.String()] = true
		}
		require.Equal(t, outage, got)
		p = search(t, s, dlq.SearchFilter{ErrorGroup: g.ID, Topic: "orders:dlq", Text: `"n"`})
		require.EqualValues(t, 3, p.Total)
		require.Len(t, p.Messages, 3)
		require.Zero(t, search(t, s, dlq.SearchFilter{ErrorGroup: dlq.ErrorGroupID("never seen")}).Total)

		// Counts follow status changes; a status filter leaves out groups
		// with none.
		m := search(t, s, dlq.SearchFilter{ErrorGroup: g.ID, Topic: "failed_jobs"}).Messages[0]
		resolve(t, s, m.ID, t0.Add(1))
		gs = errorGroups(t, s, dlq.GroupFilter{Statuses: []dlq.Status{dlq.StatusResolved}})
		require.Len(t, gs, 1)
		require.EqualValues(t, 1, gs[0].Counts[dlq.StatusResolved])
		require.Equal(t, []string{"failed_jobs"}, gs[0].DLQTopics)
		gs = errorGroups(t, s, dlq.GroupFilter{Topic: "orders:dlq"})
		require.Len(t, gs, 2)
		require.Equal(t, []string{"orders:dlq"}, gs[0].DLQTopics, "the topic filter narrows what is counted")
	})
}

// Failure groups recorded before migration 025 have no error group: the
// backfill gives each the one intake gives, and changes nothing else.
func TestErrorGroupsBackfillOldFailureGroups(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		outageFixture(t, s)
		want := errorGroups(t, s, dlq.GroupFilter{})
		before := search(t, s, dlq.SearchFilter{}).Messages
		exec(t, s, `UPDATE dlq.dlq_failure_groups SET error_group = ''`, `UPDATE dlq_failure_groups SET error_group = ''`)
		require.Empty(t, errorGroups(t, s, dlq.GroupFilter{}), "not listed until backfilled")
		n, err := s.BackfillDLQGroups(ctx, 4)
		require.NoError(t, err)
		require.Equal(t, 4, n)
		n, err = s.BackfillDLQGroups(ctx, 4)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		n, err = s.BackfillDLQGroups(ctx, 4)
		require.NoError(t, err)
		require.Zero(t, n)
		require.Equal(t, want, errorGroups(t, s, dlq.GroupFilter{}))
		after := search(t, s, dlq.SearchFilter{}).Messages
		require.Equal(t, len(before), len(after))
		for i := range before {
			require.Equal(t, before[i].ID, after[i].ID)
			require.Equal(t, before[i].Group, after[i].Group)
			require.Equal(t, before[i].UpdatedAt, after[i].UpdatedAt)
		}
	})
}

// Each group counts its live messages per hour over the last 24 hours
// (the current one last); an error group adds up its failure groups'.
// What came before the window is not counted.
func TestGroupsCountArrivalsPerHour(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		now := t0.Add(36*time.Hour + 40*time.Minute)
		at := func(d time.Duration, base int, errText string) {
			var batch []dlq.Incoming
			for i := 0; i < 3; i++ {
				in := incoming("orders.dlq.v1", int64(base+i), `{}`)
				in.ErrorMessage = errText
				batch = append(batch, in)
			}
			ingest(t, s, now.Add(-d), batch...)
		}
		at(10*time.Minute, 0, "Connection refused: db-1:5432") // the current hour
		at(5*time.Hour, 10, "Connection refused: db-2:5432")   // 5 hours back
		at(30*time.Hour, 20, "Connection refused: db-3:5432")  // before the window
		in := incoming("payments.dlq.v1", 0, `{}`)
		in.OriginalTopic, in.ErrorMessage = "payments.events.v1", "Connection refused: db-1:5432"
		ingest(t, s, now.Add(-time.Hour), in)

		gs, err := s.DLQGroups(ctx, dlq.GroupFilter{Sort: dlq.GroupsByCount, Limit: 50, Now: now})
		require.NoError(t, err)
		require.Len(t, gs, 2)
		want := make([]int64, dlq.ArrivalHours)
		want[23], want[18] = 3, 3
		require.Equal(t, want, gs[0].Arrivals, "orders: 9 stored, 6 within the window")
		require.True(t, gs[0].ArrivalsFrom.Equal(now.Truncate(time.Hour).Add(-23*time.Hour)))
		want = make([]int64, dlq.ArrivalHours)
		want[22] = 1
		require.Equal(t, want, gs[1].Arrivals)

		es, err := s.DLQGroups(ctx, dlq.GroupFilter{By: dlq.GroupByError, Sort: dlq.GroupsByCount, Limit: 50, Now: now})
		require.NoError(t, err)
		require.Len(t, es, 1)
		want = make([]int64, dlq.ArrivalHours)
		want[23], want[22], want[18] = 3, 1, 3
		require.Equal(t, want, es[0].Arrivals, "the error group adds up both topics")

		none, err := s.DLQGroups(ctx, dlq.GroupFilter{Sort: dlq.GroupsByCount, Limit: 50})
		require.NoError(t, err)
		require.Nil(t, none[0].Arrivals, "no window asked for, none counted")
	})
}
