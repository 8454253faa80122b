package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
)

func TestDeletionJobs(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		tenant := uuid.NewString()
		job, created, err := s.CreateDeletionJob(ctx, tenant, []string{"redis:sessions", "postgres:app"}, t0)
		require.NoError(t, err)
		require.True(t, created)
		require.Equal(t, deletion.JobPending, job.Status)
		require.Len(t, job.Deleters, 2)

		again, created, err := s.CreateDeletionJob(ctx, tenant, []string{"x"}, t0.Add(time.Second))
		require.NoError(t, err)
		require.False(t, created, "an active job is returned, not duplicated")
		require.Equal(t, job.ID, again.ID)

		claimed, err := s.ClaimDeletionJob(ctx, "d1", t0, t0.Add(30*time.Second), 0)
		require.NoError(t, err)
		require.NotNil(t, claimed)
		require.Equal(t, job.ID, claimed.ID)
		require.Equal(t, deletion.JobRunning, claimed.Status)
		require.Equal(t, 1, claimed.Attempts)

		none, err := s.ClaimDeletionJob(ctx, "d2", t0.Add(time.Second), t0.Add(time.Minute), 0)
		require.NoError(t, err)
		require.Nil(t, none, "a leased job is not claimed twice")

		require.NoError(t, s.SetDeleterState(ctx, job.ID, "d1", deletion.DeleterState{Name: "redis:sessions", Status: deletion.DeleterSucceeded, DeletedCount: 42, Total: 42, Attempts: 1, UpdatedAt: t0}))
		require.NoError(t, s.SetDeleterState(ctx, job.ID, "d1", deletion.DeleterState{Name: "postgres:app", Status: deletion.DeleterFailed, DeletedCount: 5, Total: -1, Attempts: 1, Error: "connection refused", UpdatedAt: t0}))
		require.ErrorIs(t, s.SetDeleterState(ctx, job.ID, "d2", deletion.DeleterState{Name: "x", Status: deletion.DeleterFailed, UpdatedAt: t0}), derrors.ErrLeaseLost)
		require.ErrorIs(t, s.RenewDeletionLease(ctx, job.ID, "d2", t0.Add(time.Hour)), derrors.ErrLeaseLost)
		require.NoError(t, s.RenewDeletionLease(ctx, job.ID, "d1", t0.Add(time.Minute)))

		next := t0.Add(time.Minute)
		require.NoError(t, s.FinishDeletionAttempt(ctx, job.ID, "d1", deletion.JobUpdate{Status: deletion.JobPartial, LastError: "1 deleter failed", NextAttemptAt: &next, Now: t0}))
		latest, err := s.LatestDeletionJob(ctx, tenant)
		require.NoError(t, err)
		require.Equal(t, deletion.JobPartial, latest.Status)
		require.Equal(t, "1 deleter failed", latest.LastError)
		require.Equal(t, deletion.DeleterFailed, latest.Deleters[0].Status)
		require.Equal(t, "connection refused", latest.Deleters[0].Error)
		require.EqualValues(t, 42, latest.Deleters[1].DeletedCount)
		require.EqualValues(t, 42, latest.Deleters[1].Total)
		require.EqualValues(t, -1, latest.Deleters[0].Total, "unknown total")

		claim := func(owner string, now, leaseUntil time.Time) *deletion.Job {
			t.Helper()
			j, err := s.ClaimDeletionJob(ctx, owner, now, leaseUntil, 0)
			require.NoError(t, err)
			return j
		}
		require.Nil(t, claim("d2", t0.Add(30*time.Second), t0.Add(time.Hour)), "not due yet")
		// Due: d2 claims; d2 then dies, and d3 takes over after the lease.
		claimed = claim("d2", t0.Add(2*time.Minute), t0.Add(3*time.Minute))
		require.NotNil(t, claimed)
		require.Equal(t, 2, claimed.Attempts)
		require.Nil(t, claim("d3", t0.Add(150*time.Second), t0.Add(time.Hour)))
		require.NotNil(t, claim("d3", t0.Add(4*time.Minute), t0.Add(5*time.Minute)))
		require.ErrorIs(t, s.FinishDeletionAttempt(ctx, job.ID, "d2", deletion.JobUpdate{Status: deletion.JobCompleted, Now: t0}), derrors.ErrLeaseLost)
		require.NoError(t, s.FinishDeletionAttempt(ctx, job.ID, "d3", deletion.JobUpdate{Status: deletion.JobCompleted, Verified: true, Now: t0.Add(5 * time.Minute)}))

		latest, err = s.LatestDeletionJob(ctx, tenant)
		require.NoError(t, err)
		require.Equal(t, deletion.JobCompleted, latest.Status)
		require.True(t, latest.Verified)
		require.NotNil(t, latest.FinishedAt)

		// A completed job does not block a new one.
		newer, created, err := s.CreateDeletionJob(ctx, tenant, []string{"redis:sessions"}, t0.Add(time.Hour))
		require.NoError(t, err)
		require.True(t, created)
		require.NotEqual(t, job.ID, newer.ID)
		latest, err = s.LatestDeletionJob(ctx, tenant)
		require.NoError(t, err)
		require.Equal(t, newer.ID, latest.ID)

		_, err = s.LatestDeletionJob(ctx, "no-such-tenant")
		require.ErrorIs(t, err, derrors.ErrNotFound)
	})
}

// TestDeletionJobBreakdown: a deleter's counts per table or key pattern
// and its verification survive the store as they were written, and a
// deleter that never reported one reads back as unknown (nil), not as zero.
func TestDeletionJobBreakdown(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		tenant := uuid.NewString()
		job, _, err := s.CreateDeletionJob(ctx, tenant, []string{"postgres:app", "redis:sessions"}, t0)
		require.NoError(t, err)
		for _, d := range job.Deleters {
			require.Nil(t, d.TotalBreakdown, "%s: nothing counted yet", d.Name)
			require.Nil(t, d.DeletedBreakdown)
			require.Nil(t, d.Verification)
		}
		_, err = s.ClaimDeletionJob(ctx, "d1", t0, t0.Add(time.Minute), 0)
		require.NoError(t, err)

		pg := deletion.DeleterState{Name: "postgres:app", Status: deletion.DeleterRunning, DeletedCount: 7, Total: 12, Attempts: 1, UpdatedAt: t0,
			TotalBreakdown:   map[string]int64{"public.steps": 8, `"Quoted"."Mixed Case"`: 4, "public.empty": 0},
			DeletedBreakdown: map[string]int64{"public.steps": 5, `"Quoted"."Mixed Case"`: 2, "public.empty": 0}}
		require.NoError(t, s.SetDeleterState(ctx, job.ID, "d1", pg))
		latest, err := s.LatestDeletionJob(ctx, tenant)
		require.NoError(t, err)
		require.Equal(t, pg.TotalBreakdown, latest.Deleters[0].TotalBreakdown)
		require.Equal(t, pg.DeletedBreakdown, latest.Deleters[0].DeletedBreakdown)
		require.Nil(t, latest.Deleters[0].Verification)
		require.Nil(t, latest.Deleters[1].DeletedBreakdown, "the other deleter is untouched")

		// The attempt ends; the verification is stored with the result.
		pg.Status, pg.DeletedCount = deletion.DeleterSucceeded, 12
		pg.DeletedBreakdown = map[string]int64{"public.steps": 8, `"Quoted"."Mixed Case"`: 4, "public.empty": 0}
		pg.Verification = &deletion.Verification{Count: 0, Breakdown: map[string]int64{"public.steps": 0, `"Quoted"."Mixed Case"`: 0, "public.empty": 0}}
		redis := deletion.DeleterState{Name: "redis:sessions", Status: deletion.DeleterSucceeded, DeletedCount: 3, Total: 3, Attempts: 1, UpdatedAt: t0,
			TotalBreakdown: map[string]int64{}, DeletedBreakdown: map[string]int64{},
			Verification: &deletion.Verification{Count: 0, Breakdown: map[string]int64{}}}
		require.NoError(t, s.SetDeleterState(ctx, job.ID, "d1", pg))
		require.NoError(t, s.SetDeleterState(ctx, job.ID, "d1", redis))
		require.ErrorIs(t, s.SetDeleterState(ctx, job.ID, "d2", pg), derrors.ErrLeaseLost, "no lease, no write")
		require.NoError(t, s.FinishDeletionAttempt(ctx, job.ID, "d1", deletion.JobUpdate{Status: deletion.JobCompleted, Verified: true, Now: t0}))

		latest, err = s.LatestDeletionJob(ctx, tenant)
		require.NoError(t, err)
		require.Equal(t, pg.DeletedBreakdown, latest.Deleters[0].DeletedBreakdown)
		require.Equal(t, pg.TotalBreakdown, latest.Deleters[0].TotalBreakdown)
		require.Equal(t, pg.Verification, latest.Deleters[0].Verification)
		require.Equal(t, map[string]int64{}, latest.Deleters[1].DeletedBreakdown, "known to be empty")
		require.Equal(t, redis.Verification, latest.Deleters[1].Verification)

		// A later write without a verification clears it: a verification
		// belongs to the deletes it followed.
		newer, _, err := s.CreateDeletionJob(ctx, tenant, []string{"postgres:app"}, t0.Add(time.Hour))
		require.NoError(t, err)
		_, err = s.ClaimDeletionJob(ctx, "d1", t0.Add(time.Hour), t0.Add(2*time.Hour), 0)
		require.NoError(t, err)
		withV := deletion.DeleterState{Name: "postgres:app", Status: deletion.DeleterPending, Total: 1, UpdatedAt: t0,
			Verification: &deletion.Verification{Count: 1, Breakdown: map[string]int64{"public.steps": 1}}}
		require.NoError(t, s.SetDeleterState(ctx, newer.ID, "d1", withV))
		withV.Verification = nil
		require.NoError(t, s.SetDeleterState(ctx, newer.ID, "d1", withV))
		latest, err = s.LatestDeletionJob(ctx, tenant)
		require.NoError(t, err)
		require.Equal(t, newer.ID, latest.ID)
		require.Nil(t, latest.Deleters[0].Verification)
	})
}
