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

func testShape(target string) (string, []byte) {
	s := deletion.PlanShape{Deleters: []deletion.DeleterShape{{Name: "postgres:app", Planner: true, Fingerprint: "fp",
		Steps: []deletion.StepShape{{Target: target, Via: "tenant column tenant_id"}}}}}
	return s.Hash(), s.Canonical()
}

// TestJobAwaitingApproval: a job created under require_approval is
// AWAITING_APPROVAL, never claimed, listed and counted as such; approving
// it holds it to the approved plan and makes it due (SCHEDULED until its
// not_before); approving it again is a conflict.
func TestJobAwaitingApproval(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		hash, body := testShape("public.orders")
		require.NoError(t, s.SavePlan(ctx, hash, body, t0))
		require.NoError(t, s.SavePlan(ctx, hash, body, t0.Add(time.Hour)), "saving it again changes nothing")
		got, err := s.PlanBody(ctx, hash)
		require.NoError(t, err)
		shape, err := deletion.ParsePlanShape(hash, got)
		require.NoError(t, err, "the stored body hashes to its key")
		require.Equal(t, "public.orders", shape.Deleters[0].Steps[0].Target)
		_, err = s.PlanBody(ctx, "sha256:"+uuid.NewString())
		require.ErrorIs(t, err, derrors.ErrNotFound)

		uid := int64(1001)
		at := t0.Add(time.Hour)
		job := createJob(t, ctx, s, deletion.JobRequest{Tenant: uuid.NewString(), UID: &uid, PlanHash: hash, RequireApproval: true, NotBefore: &at}, t0)
		require.Equal(t, deletion.JobAwaitingApproval, job.Status)
		require.True(t, job.ApprovalRequired)
		require.Equal(t, hash, job.PlanHash)
		require.Nil(t, job.NextAttemptAt)
		now := createJob(t, ctx, s, deletion.JobRequest{Tenant: uuid.NewString(), UID: &uid, PlanHash: hash, RequireApproval: true}, t0)
		require.Equal(t, deletion.JobAwaitingApproval, now.Status)
		plain := createJob(t, ctx, s, deletion.JobRequest{Tenant: uuid.NewString(), PlanHash: hash}, t0)
		require.Equal(t, deletion.JobPending, plain.Status)
		require.False(t, plain.ApprovalRequired)
		require.Equal(t, hash, plain.PlanHash)

		require.Equal(t, plain.ID, claimAt(t, ctx, s, "d1", t0.Add(48*time.Hour), 0).ID)
		require.Nil(t, claimAt(t, ctx, s, "d1", t0.Add(48*time.Hour), 0), "jobs awaiting approval are never claimed")

		f := deletion.JobFilter{Statuses: []deletion.JobStatus{deletion.JobAwaitingApproval}, Limit: 10}
		listed, err := s.ListDeletionJobs(ctx, f)
		require.NoError(t, err)
		require.Len(t, listed, 2)
		f.Statuses = []deletion.JobStatus{deletion.JobScheduled}
		listed, err = s.ListDeletionJobs(ctx, f)
		require.NoError(t, err)
		require.Empty(t, listed, "stored as SCHEDULED, but not listed as such")
		stats, err := s.DeletionJobStats(ctx, t0.Add(48*time.Hour))
		require.NoError(t, err)
		require.EqualValues(t, 2, stats.ByStatus[deletion.JobAwaitingApproval])
		require.Zero(t, stats.ByStatus[deletion.JobScheduled])
		require.Nil(t, stats.OldestOverdue, "a job awaiting approval is not overdue")

		other, _ := testShape("public.invoices")
		approver := int64(1002)
		approved, err := s.ApproveDeletionJob(ctx, job.ID, other, &approver, t0.Add(time.Minute))
		require.NoError(t, err)
		require.Equal(t, deletion.JobScheduled, approved.Status, "waits out its not_before")
		require.Equal(t, at, approved.NextAttemptAt.UTC())
		require.Equal(t, other, approved.PlanHash)
		require.Equal(t, approver, *approved.ApprovedByUID)
		require.Equal(t, t0.Add(time.Minute), approved.ApprovedAt.UTC())
		require.Equal(t, uid, *approved.RequestedByUID)
		_, err = s.ApproveDeletionJob(ctx, job.ID, other, &approver, t0.Add(time.Minute))
		require.ErrorIs(t, err, derrors.ErrConflict)

		approved, err = s.ApproveDeletionJob(ctx, now.ID, hash, &approver, t0.Add(time.Minute))
		require.NoError(t, err)
		require.Equal(t, deletion.JobPending, approved.Status)
		require.Equal(t, now.ID, claimAt(t, ctx, s, "d1", t0.Add(time.Minute), 0).ID)

		// Cancel works on a job awaiting approval, and it stays cancelled.
		waiting := createJob(t, ctx, s, deletion.JobRequest{Tenant: uuid.NewString(), PlanHash: hash, RequireApproval: true}, t0)
		cancelled, outcome, err := s.CancelDeletionJob(ctx, waiting.TenantID, &uid, t0.Add(time.Minute))
		require.NoError(t, err)
		require.Equal(t, deletion.CancelledNow, outcome)
		require.Equal(t, deletion.JobCancelled, cancelled.Status)
		_, err = s.ApproveDeletionJob(ctx, waiting.ID, hash, &approver, t0.Add(time.Minute))
		require.ErrorIs(t, err, derrors.ErrConflict)
	})
}

// TestAwaitApprovalEndsTheAttempt: a runner that found the plan changed
// sends the job back with the reason, unless a cancel came first; only the
// lease holder can, and adopt a plan.
func TestAwaitApprovalEndsTheAttempt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		job := createJob(t, ctx, s, deletion.JobRequest{Tenant: uuid.NewString()}, t0)
		require.Empty(t, job.PlanHash)
		claimed := claimAt(t, ctx, s, "d1", t0, 0)
		require.Equal(t, job.ID, claimed.ID)
		hash, _ := testShape("public.orders")
		require.ErrorIs(t, s.AdoptPlan(ctx, job.ID, "d2", hash), derrors.ErrLeaseLost)
		require.NoError(t, s.AdoptPlan(ctx, job.ID, "d1", hash))
		require.ErrorIs(t, s.AwaitApproval(ctx, job.ID, "d2", "x", t0), derrors.ErrLeaseLost)
		require.NoError(t, s.AwaitApproval(ctx, job.ID, "d1", "postgres:app: new target public.invoices", t0.Add(time.Second)))
		back, err := s.LatestDeletionJob(ctx, job.TenantID)
		require.NoError(t, err)
		require.Equal(t, deletion.JobAwaitingApproval, back.Status)
		require.Equal(t, hash, back.PlanHash)
		require.Equal(t, "postgres:app: new target public.invoices", back.PlanDrift)
		require.Equal(t, back.PlanDrift, back.LastError)
		require.False(t, back.ApprovalRequired, "it was not created under require_approval")
		require.Nil(t, claimAt(t, ctx, s, "d1", t0.Add(time.Hour), 0))

		// A cancel requested while the attempt ran wins.
		other := createJob(t, ctx, s, deletion.JobRequest{Tenant: uuid.NewString()}, t0)
		require.Equal(t, other.ID, claimAt(t, ctx, s, "d1", t0, 0).ID)
		_, outcome, err := s.CancelDeletionJob(ctx, other.TenantID, nil, t0)
		require.NoError(t, err)
		require.Equal(t, deletion.CancelRequested, outcome)
		require.NoError(t, s.AwaitApproval(ctx, other.ID, "d1", "changed", t0.Add(time.Second)))
		ended, err := s.LatestDeletionJob(ctx, other.TenantID)
		require.NoError(t, err)
		require.Equal(t, deletion.JobCancelled, ended.Status)
		require.Empty(t, ended.PlanDrift)
		require.NotNil(t, ended.FinishedAt)
	})
}
