package archive_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/archive"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/idempotency"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/migrations"
)

const day = 24 * time.Hour

func scheduler(s archive.Store, now time.Time, batch int) *archive.Scheduler {
	sch := archive.New(s, func() archive.Config {
		return archive.Config{Enabled: true, Interval: time.Hour, Retention: 30 * day, ArchiveRetention: 365 * day, BatchSize: batch}
	}, hclog.NewNullLogger(), nil, nil)
	return sch.WithClock(func() time.Time { return now })
}

// finished stores n messages that reached status at the given time.
func finished(t *testing.T, s store.Store, topic string, n int, status dlq.Status, at time.Time) []uuid.UUID {
	ctx := testsvc.Context(t, time.Minute)
	var batch []dlq.Incoming
	base := int64(time.Now().UnixNano())
	for i := 0; i < n; i++ {
		batch = append(batch, dlq.Incoming{Position: dlq.LogPosition("kafka", topic, 0, base+int64(i)),
			OriginalTopic: "o", ErrorMessage: "e", Payload: []byte("{}")})
	}
	_, err := s.IngestDLQ(ctx, batch, dlq.IngestOptions{Now: at, MaxRetries: 1})
	require.NoError(t, err)
	claimAt := at.Add(-time.Minute) // an UPDATE leaving updated_at unchanged gets the trigger's clock time
	claimed, err := s.ClaimDLQTopic(ctx, topic, nil, n, dlq.Claim{Owner: "t", Now: claimAt, LeaseUntil: at.Add(time.Hour)})
	require.NoError(t, err)
	var outs []dlq.Outcome
	var ids []uuid.UUID
	for _, m := range claimed {
		ids = append(ids, m.ID)
		switch status {
		case dlq.StatusResolved:
			outs = append(outs, dlq.Finish(m, dlq.EventAcked))
		case dlq.StatusDead:
			outs = append(outs, dlq.Finish(m, dlq.EventRefused))
		case dlq.StatusPending:
			outs = append(outs, dlq.Finish(m, dlq.EventReleased))
		case dlq.StatusRetrying:
			continue
		}
	}
	_, err = s.FinishDLQ(ctx, "t", at, outs)
	require.NoError(t, err)
	return ids
}

func count(t *testing.T, s store.Store, topic string, status dlq.Status) int64 {
	_, total, err := s.ListDLQ(testsvc.Context(t, time.Minute), dlq.ListFilter{Topic: topic, Status: status, Page: 1, PageSize: 1})
	require.NoError(t, err)
	return total
}

func TestArchiveBoundariesAndStatuses(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
		cutoff := now.Add(-30 * day)
		finished(t, s, "older", 3, dlq.StatusResolved, cutoff.Add(-time.Second))
		finished(t, s, "older", 2, dlq.StatusDead, cutoff.Add(-time.Second))
		finished(t, s, "younger", 4, dlq.StatusResolved, cutoff.Add(time.Second))
		finished(t, s, "pending", 2, dlq.StatusPending, cutoff.Add(-300*day))
		finished(t, s, "retrying", 2, dlq.StatusRetrying, cutoff.Add(-300*day))

		res, err := scheduler(s, now, 2).RunOnce(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 5, res.Archived, "just older than retention: archived")
		require.GreaterOrEqual(t, res.Batches, 3, "in batches of 2")
		require.Zero(t, count(t, s, "older", ""))
		require.EqualValues(t, 4, count(t, s, "younger", ""), "just younger: kept")
		require.EqualValues(t, 2, count(t, s, "pending", dlq.StatusPending), "PENDING is never archived")
		require.EqualValues(t, 2, count(t, s, "retrying", dlq.StatusRetrying), "RETRYING is never archived")

		// A year after they finished, archived rows are purged. (By then
		// the younger ones are archived too, half a second short of purging.)
		olderAt := cutoff.Add(-time.Second)
		res, err = scheduler(s, olderAt.Add(365*day-500*time.Millisecond), 100).RunOnce(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 4, res.Archived)
		require.Zero(t, res.PurgedDLQ, "just younger than archive_retention: kept")
		res, err = scheduler(s, olderAt.Add(365*day+500*time.Millisecond), 100).RunOnce(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 5, res.PurgedDLQ, "just older: purged")
	})
}

func TestExpiredIdempotencyKeysArePurgedLiveOnesKept(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
		for i, exp := range []time.Time{now.Add(-time.Second), now.Add(-72 * time.Hour), now.Add(time.Second), now.Add(72 * time.Hour)} {
			rec := idempotency.Record{CallerUID: 1, Key: fmt.Sprint("k", i), Route: "POST /x", RequestHash: "h", ExpiresAt: exp}
			holder, err := s.ReserveIdempotencyKey(ctx, rec, now.Add(-73*time.Hour), now.Add(-74*time.Hour))
			require.NoError(t, err)
			require.Nil(t, holder)
		}
		res, err := scheduler(s, now, 1).RunOnce(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 2, res.PurgedKeys)
		for i, live := range []bool{false, false, true, true} {
			holder, err := s.ReserveIdempotencyKey(ctx, idempotency.Record{CallerUID: 1, Key: fmt.Sprint("k", i), RequestHash: "other", ExpiresAt: now.Add(time.Hour)}, now, now.Add(-100*time.Hour))
			require.NoError(t, err)
			require.Equal(t, live, holder != nil, "key k%d", i)
		}
	})
}

func TestDryRunCountsWhatThePassThenDoesAndChangesNothing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		d := s.Dialect()
		now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
		// Archived a year ago by an earlier pass: half past the archive
		// retention now.
		finished(t, s, "archived", 6, dlq.StatusResolved, now.Add(-400*day))
		_, err := scheduler(s, now.Add(-300*day), 100).RunOnce(ctx)
		require.NoError(t, err)
		finished(t, s, "kept-in-archive", 2, dlq.StatusResolved, now.Add(-100*day))
		_, err = scheduler(s, now.Add(-40*day), 100).RunOnce(ctx)
		require.NoError(t, err)
		// Live: old enough to archive, one group even old enough to purge in
		// the same pass; too young; never archived.
		finished(t, s, "old", 3, dlq.StatusDead, now.Add(-31*day))
		finished(t, s, "ancient", 4, dlq.StatusResolved, now.Add(-366*day))
		finished(t, s, "young", 5, dlq.StatusResolved, now.Add(-29*day))
		finished(t, s, "pending", 2, dlq.StatusPending, now.Add(-500*day))
		for i, exp := range []time.Time{now.Add(-time.Hour), now, now.Add(time.Hour)} {
			_, err := s.ReserveIdempotencyKey(ctx, idempotency.Record{CallerUID: 1, Key: fmt.Sprint("k", i), Route: "POST /x",
				RequestHash: "h", ExpiresAt: exp}, now.Add(-73*time.Hour), now.Add(-74*time.Hour))
			require.NoError(t, err)
		}
		liveBefore, archivedBefore := ids(t, d, s)

		sch := scheduler(s, now, 2)
		dry, err := sch.DryRun(ctx)
		require.NoError(t, err)
		require.True(t, dry.DryRun)
		require.Equal(t, [3]int64{7, 6 + 4, 2}, counts(dry), "archived, purged from the archive, purged keys")
		liveAfter, archivedAfter := ids(t, d, s)
		require.Equal(t, liveBefore, liveAfter, "a dry run moves nothing")
		require.Equal(t, archivedBefore, archivedAfter, "a dry run purges nothing")

		res, err := sch.RunOnce(ctx)
		require.NoError(t, err)
		require.False(t, res.DryRun)
		require.Equal(t, counts(dry), counts(res), "the pass did what the dry run said")
		again, err := sch.DryRun(ctx)
		require.NoError(t, err)
		require.Equal(t, [3]int64{}, counts(again), "nothing left to do after the pass")
	})
}

func counts(r archive.Result) [3]int64 { return [3]int64{r.Archived, r.PurgedDLQ, r.PurgedKeys} }

// ids lists every id in the live table and in the archive.
func ids(t *testing.T, d migrations.Dialect, s store.Store) (live, archived []string) {
	ctx := testsvc.Context(t, time.Minute)
	q := func(table string) []string {
		var out []string
		switch x := s.(type) {
		case *store.SQLite:
			rows, err := x.DB().QueryContext(ctx, "SELECT id FROM "+table)
			require.NoError(t, err)
			defer rows.Close()
			for rows.Next() {
				var id string
				require.NoError(t, rows.Scan(&id))
				out = append(out, id)
			}
		case *store.Postgres:
			rows, err := x.Pool().Query(ctx, "SELECT id::text FROM dlq."+table)
			require.NoError(t, err)
			defer rows.Close()
			for rows.Next() {
				var id string
				require.NoError(t, rows.Scan(&id))
				out = append(out, id)
			}
		}
		sort.Strings(out)
		return out
	}
	return q("dlq_messages"), q("dlq_messages_archive")
}

func TestArchiveNeverLosesARowWhileRowsArrive(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		d := s.Dialect()
		now := time.Now()
		old := finished(t, s, "orders.dlq.v1", 1000, dlq.StatusResolved, now.Add(-40*day))
		var wg sync.WaitGroup
		stop := make(chan struct{})
		inserted := 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 30; i++ {
				select {
				case <-stop:
					return
				default:
				}
				finished(t, s, "orders.dlq.v1", 20, dlq.StatusResolved, now.Add(-time.Duration(35+i%10)*day))
				inserted += 20
			}
		}()
		sch := scheduler(s, now, 100)
		for i := 0; i < 5; i++ {
			_, err := sch.RunOnce(ctx)
			require.NoError(t, err)
		}
		close(stop)
		wg.Wait()
		_, err := sch.RunOnce(ctx)
		require.NoError(t, err)
		live, archived := ids(t, d, s)
		require.Len(t, append(live, archived...), len(old)+inserted, "live + archived = everything ever stored")
		seen := map[string]bool{}
		for _, id := range append(live, archived...) {
			require.False(t, seen[id], "id %s in both tables", id)
			seen[id] = true
		}
		for _, id := range old {
			require.True(t, seen[id.String()])
		}
		require.Empty(t, live, "everything eligible was archived")
	})
}

func TestArchiveProcedureKeepsTheInvariant(t *testing.T) {
	s := storetest.Open(t, migrations.Postgres).(*store.Postgres)
	now := time.Now()
	finished(t, s, "a", 250, dlq.StatusResolved, now.Add(-40*day))
	finished(t, s, "a", 50, dlq.StatusDead, now.Add(-31*day))
	finished(t, s, "a", 30, dlq.StatusResolved, now.Add(-29*day))
	finished(t, s, "a", 20, dlq.StatusPending, now.Add(-100*day))
	liveBefore, _ := ids(t, migrations.Postgres, s)
	_, err := s.Pool().Exec(testsvc.Context(t, time.Minute), "CALL dlq.archive_old_dlq_messages(30, 40)")
	require.NoError(t, err)
	live, archived := ids(t, migrations.Postgres, s)
	require.Len(t, archived, 300)
	require.Len(t, live, 50)
	require.ElementsMatch(t, liveBefore, append(live, archived...), "the same set of ids")
	require.EqualValues(t, 20, count(t, s, "a", dlq.StatusPending))
}

func TestOnePassAtATimeAcrossDaemons(t *testing.T) {
	dsn := storetest.DSN(t, migrations.Postgres)
	s1 := storetest.OpenDSN(t, migrations.Postgres, dsn)
	s2 := storetest.OpenDSN(t, migrations.Postgres, dsn)
	unlock, ok, err := s1.TryRetentionLock(testsvc.Context(t, time.Minute))
	require.NoError(t, err)
	require.True(t, ok)
	_, err = scheduler(s2, time.Now(), 10).RunOnce(testsvc.Context(t, time.Minute))
	require.True(t, errors.Is(err, archive.ErrBusy), "%v", err)
	unlock()
	_, err = scheduler(s2, time.Now(), 10).RunOnce(testsvc.Context(t, time.Minute))
	require.NoError(t, err)

	// Concurrent passes from two daemons: exactly the eligible rows move once.
	finished(t, s1, "x", 500, dlq.StatusResolved, time.Now().Add(-40*day))
	var wg sync.WaitGroup
	results := make([]archive.Result, 2)
	errs := make([]error, 2)
	for i, s := range []store.Store{s1, s2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = scheduler(s, time.Now(), 50).RunOnce(testsvc.Context(t, time.Minute))
		}()
	}
	wg.Wait()
	var moved int64
	for i := range errs {
		if errs[i] == nil {
			moved += results[i].Archived
		} else {
			require.ErrorIs(t, errs[i], archive.ErrBusy)
		}
	}
	require.EqualValues(t, 500, moved)
}
