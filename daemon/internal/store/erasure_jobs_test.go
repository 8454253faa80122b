package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
	"github.com/lifecycled/lifecycled/migrations"
)

func createJob(t *testing.T, ctx context.Context, s store.Store, req deletion.JobRequest, now time.Time) *deletion.Job {
	t.Helper()
	res, err := s.CreateDeletionJobs(ctx, []deletion.JobRequest{req}, []string{"postgres:app", "redis:sessions"}, now)
	require.NoError(t, err)
	require.NotNil(t, res[0].Job, "%+v", res[0])
	return res[0].Job
}

func claimAt(t *testing.T, ctx context.Context, s store.Store, owner string, now time.Time, maxJobs int) *deletion.Job {
	t.Helper()
	j, err := s.ClaimDeletionJob(ctx, owner, now, now.Add(time.Minute), maxJobs)
	require.NoError(t, err)
	return j
}

func TestScheduledJobWaitsForItsTime(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		at := t0.Add(time.Hour)
		uid := int64(1001)
		job := createJob(t, ctx, s, deletion.JobRequest{Tenant: uuid.NewString(), NotBefore: &at, UID: &uid}, t0)
		require.Equal(t, deletion.JobScheduled, job.Status)
		require.Equal(t, at, job.NotBefore.UTC())
		require.Equal(t, at, job.NextAttemptAt.UTC())
		require.Equal(t, uid, *job.RequestedByUID)
		require.Nil(t, job.StartedAt)

		require.Nil(t, claimAt(t, ctx, s, "d1", at.Add(-time.Second), 0), "not before its time")
		claimed := claimAt(t, ctx, s, "d1", at, 0)
		require.NotNil(t, claimed)
		require.Equal(t, deletion.JobRunning, claimed.Status)
		require.Equal(t, at, claimed.StartedAt.UTC(), "started_at is the first claim")

		// A later attempt keeps the first start.
		next := at.Add(time.Minute)
		require.NoError(t, s.FinishDeletionAttempt(ctx, claimed.ID, "d1", deletion.JobUpdate{Status: deletion.JobPartial, NextAttemptAt: &next, Now: at}))
		again := claimAt(t, ctx, s, "d2", next, 0)
		require.Equal(t, at, again.StartedAt.UTC())

		// A time in the past is no schedule at all.
		past := t0.Add(-time.Hour)
		now := createJob(t, ctx, s, deletion.JobRequest{Tenant: uuid.NewString(), NotBefore: &past}, t0)
		require.Equal(t, deletion.JobPending, now.Status)
		require.Nil(t, now.NotBefore)
	})
}

func TestCancelDeletionJob(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		uid := int64(42)
		// Not running: cancelled at once, whatever it waited for.
		at := t0.Add(time.Hour)
		for name, req := range map[string]deletion.JobRequest{
			"scheduled": {Tenant: uuid.NewString(), NotBefore: &at},
			"pending":   {Tenant: uuid.NewString()},
		} {
			job := createJob(t, ctx, s, req, t0)
			got, outcome, err := s.CancelDeletionJob(ctx, req.Tenant, &uid, t0.Add(time.Second))
			require.NoError(t, err, name)
			require.Equal(t, deletion.CancelledNow, outcome, name)
			require.Equal(t, job.ID, got.ID)
			require.Equal(t, deletion.JobCancelled, got.Status, name)
			require.Equal(t, uid, *got.CancelledByUID)
			require.NotNil(t, got.FinishedAt)
			require.Nil(t, claimAt(t, ctx, s, "d1", at.Add(time.Hour), 0), "%s: a cancelled job is never claimed", name)
			_, _, err = s.CancelDeletionJob(ctx, req.Tenant, &uid, t0.Add(2*time.Second))
			require.ErrorIs(t, err, derrors.ErrConflict, "%s: cancelling a finished job", name)
			require.ErrorContains(t, err, "CANCELLED")
			// The tenant may be asked for again: a new job.
			newer := createJob(t, ctx, s, deletion.JobRequest{Tenant: req.Tenant}, t0.Add(time.Minute))
			require.NotEqual(t, job.ID, newer.ID)
			_, _, err = s.CancelDeletionJob(ctx, req.Tenant, &uid, t0.Add(time.Minute))
			require.NoError(t, err)
		}

		// Running under a live lease: the request is recorded for the runner,
		// and the attempt ends CANCELLED whatever it reports (but COMPLETED).
		tenant := uuid.NewString()
		job := createJob(t, ctx, s, deletion.JobRequest{Tenant: tenant}, t0)
		require.NotNil(t, claimAt(t, ctx, s, "d1", t0, 0))
		ctl, err := s.DeletionJobControl(ctx, job.ID)
		require.NoError(t, err)
		require.Equal(t, deletion.JobControl{}, ctl)
		got, outcome, err := s.CancelDeletionJob(ctx, tenant, &uid, t0.Add(time.Second))
		require.NoError(t, err)
		require.Equal(t, deletion.CancelRequested, outcome)
		require.Equal(t, deletion.JobRunning, got.Status)
		require.NotNil(t, got.CancelRequestedAt)
		ctl, err = s.DeletionJobControl(ctx, job.ID)
		require.NoError(t, err)
		require.True(t, ctl.CancelRequested)
		now := t0.Add(2 * time.Second)
		require.NoError(t, s.FinishDeletionAttempt(ctx, job.ID, "d1", deletion.JobUpdate{Status: deletion.JobPartial, NextAttemptAt: &now, Now: now}))
		got, err = s.LatestDeletionJob(ctx, tenant)
		require.NoError(t, err)
		require.Equal(t, deletion.JobCancelled, got.Status, "never handed back to run again")
		require.Nil(t, got.NextAttemptAt)
		require.Equal(t, now, got.FinishedAt.UTC())

		// ... but a job the attempt COMPLETED stays COMPLETED.
		tenant = uuid.NewString()
		job = createJob(t, ctx, s, deletion.JobRequest{Tenant: tenant}, t0)
		require.NotNil(t, claimAt(t, ctx, s, "d1", t0, 0))
		_, _, err = s.CancelDeletionJob(ctx, tenant, nil, t0)
		require.NoError(t, err)
		require.NoError(t, s.FinishDeletionAttempt(ctx, job.ID, "d1", deletion.JobUpdate{Status: deletion.JobCompleted, Verified: true, Now: t0}))
		got, err = s.LatestDeletionJob(ctx, tenant)
		require.NoError(t, err)
		require.Equal(t, deletion.JobCompleted, got.Status)

		// Running, but its daemon died (lease over): cancelled at once, and
		// the deleters it left RUNNING with it.
		tenant = uuid.NewString()
		job = createJob(t, ctx, s, deletion.JobRequest{Tenant: tenant}, t0)
		dead, err := s.ClaimDeletionJob(ctx, "dead", t0, t0.Add(time.Second), 0)
		require.NoError(t, err)
		require.NoError(t, s.SetDeleterState(ctx, dead.ID, "dead", deletion.DeleterState{Name: "postgres:app", Status: deletion.DeleterRunning,
			DeletedCount: 3, Total: 10, UpdatedAt: t0}))
		got, outcome, err = s.CancelDeletionJob(ctx, tenant, &uid, t0.Add(time.Minute))
		require.NoError(t, err)
		require.Equal(t, deletion.CancelledNow, outcome)
		require.Equal(t, deletion.JobCancelled, got.Status)
		require.Equal(t, deletion.DeleterCancelled, got.Deleters[0].Status)
		require.EqualValues(t, 3, got.Deleters[0].DeletedCount, "what was deleted stays in the report")

		// A runner that dies after the request leaves it to the reaper.
		tenant = uuid.NewString()
		job = createJob(t, ctx, s, deletion.JobRequest{Tenant: tenant}, t0)
		_, err = s.ClaimDeletionJob(ctx, "dying", t0, t0.Add(time.Second), 0)
		require.NoError(t, err)
		_, outcome, err = s.CancelDeletionJob(ctx, tenant, &uid, t0)
		require.NoError(t, err)
		require.Equal(t, deletion.CancelRequested, outcome)
		n, err := s.ReapCancelledJobs(ctx, t0.Add(500*time.Millisecond))
		require.NoError(t, err)
		require.Zero(t, n, "its lease still runs")
		require.Nil(t, claimAt(t, ctx, s, "d2", t0.Add(time.Hour), 0), "a job whose cancel was requested is not taken over")
		n, err = s.ReapCancelledJobs(ctx, t0.Add(2*time.Second))
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		got, err = s.LatestDeletionJob(ctx, tenant)
		require.NoError(t, err)
		require.Equal(t, deletion.JobCancelled, got.Status)

		_, _, err = s.CancelDeletionJob(ctx, uuid.NewString(), &uid, t0)
		require.ErrorIs(t, err, derrors.ErrNotFound)
	})
}

func TestListDeletionJobs(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		a, b := uuid.NewString(), uuid.NewString()
		var ids []uuid.UUID // oldest first
		for i := 0; i < 7; i++ {
			tenant := a
			if i%2 == 1 {
				tenant = b
			}
			at := t0.Add(time.Duration(i) * time.Minute)
			j := createJob(t, ctx, s, deletion.JobRequest{Tenant: tenant}, at)
			if i < 6 {
				// All but the newest job of each tenant end COMPLETED.
				_, err := s.ClaimDeletionJob(ctx, "d1", at.Add(time.Hour), at.Add(2*time.Hour), 0)
				require.NoError(t, err)
				require.NoError(t, s.FinishDeletionAttempt(ctx, j.ID, "d1", deletion.JobUpdate{Status: deletion.JobCompleted, Verified: true, Now: at}))
			}
			ids = append(ids, j.ID)
		}
		list := func(f deletion.JobFilter) []uuid.UUID {
			t.Helper()
			if f.Limit == 0 {
				f.Limit = 100
			}
			jobs, err := s.ListDeletionJobs(ctx, f)
			require.NoError(t, err)
			out := []uuid.UUID{}
			for _, j := range jobs {
				require.Len(t, j.Deleters, 2, "each job with its deleters")
				out = append(out, j.ID)
			}
			return out
		}
		require.Equal(t, []uuid.UUID{ids[6], ids[5], ids[4], ids[3], ids[2], ids[1], ids[0]}, list(deletion.JobFilter{}), "newest first")
		require.Equal(t, []uuid.UUID{ids[5], ids[3], ids[1]}, list(deletion.JobFilter{Tenant: b}))
		require.Equal(t, []uuid.UUID{ids[6]}, list(deletion.JobFilter{Statuses: []deletion.JobStatus{deletion.JobPending}}))
		require.Equal(t, []uuid.UUID{ids[6], ids[5]}, list(deletion.JobFilter{Statuses: []deletion.JobStatus{deletion.JobPending, deletion.JobCompleted}, Limit: 2}))
		after, before := t0.Add(2*time.Minute), t0.Add(4*time.Minute)
		require.Equal(t, []uuid.UUID{ids[3], ids[2]}, list(deletion.JobFilter{CreatedAfter: &after, CreatedBefore: &before}))

		// Keyset pages: after the cursor of the last row of a page.
		page1, err := s.ListDeletionJobs(ctx, deletion.JobFilter{Limit: 3})
		require.NoError(t, err)
		last := page1[2]
		page2 := list(deletion.JobFilter{Limit: 3, After: &deletion.Cursor{At: last.CreatedAt, ID: last.ID}})
		require.Equal(t, []uuid.UUID{ids[3], ids[2], ids[1]}, page2)
		require.Empty(t, list(deletion.JobFilter{After: &deletion.Cursor{At: t0.Add(-time.Hour), ID: uuid.Nil}}))
	})
}

// Claims with a limit never lease more jobs than it, however many claimers
// race on one store: on PostgreSQL two daemons (two pools) at once.
func TestClaimRespectsMaxJobsAcrossDaemons(t *testing.T) {
	for _, d := range storetest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			dsn := storetest.DSN(t, d)
			stores := []store.Store{storetest.OpenDSN(t, d, dsn)}
			if d == migrations.Postgres {
				stores = append(stores, storetest.OpenDSN(t, d, dsn))
			}
			ctx := ctx(t)
			for i := 0; i < 40; i++ {
				createJob(t, ctx, stores[0], deletion.JobRequest{Tenant: uuid.NewString()}, t0)
			}
			const maxJobs = 3
			var (
				mu      sync.Mutex
				claimed []*deletion.Job
				wg      sync.WaitGroup
			)
			for w := 0; w < 8; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					st := stores[w%len(stores)]
					for i := 0; i < 10; i++ {
						j, err := st.ClaimDeletionJob(ctx, "d", t0, t0.Add(time.Minute), maxJobs)
						require.NoError(t, err)
						if j != nil {
							mu.Lock()
							claimed = append(claimed, j)
							mu.Unlock()
						}
					}
				}()
			}
			wg.Wait()
			require.Len(t, claimed, maxJobs, "never more than max_jobs live leases")

			// A finished job frees its slot; an expired lease frees one too.
			require.NoError(t, stores[0].FinishDeletionAttempt(ctx, claimed[0].ID, "d", deletion.JobUpdate{Status: deletion.JobCompleted, Verified: true, Now: t0}))
			require.NotNil(t, claimAt(t, ctx, stores[0], "d", t0, maxJobs))
			require.Nil(t, claimAt(t, ctx, stores[0], "d", t0, maxJobs))
			later := t0.Add(2 * time.Minute) // every lease above has ended
			for i := 0; i < maxJobs; i++ {
				require.NotNil(t, claimAt(t, ctx, stores[0], "e", later, maxJobs))
			}
			require.Nil(t, claimAt(t, ctx, stores[0], "e", later, maxJobs))
			require.NotNil(t, claimAt(t, ctx, stores[0], "e", later, 0), "no limit without max_jobs")
		})
	}
}
