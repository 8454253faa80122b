package deletion_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/adminapi"
	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/migrations"
)

// daemonOf is a runner and the service over it, as one daemon has them.
func daemonOf(t *testing.T, st deletion.JobStore, src deletion.Deleters, owner string, grace time.Duration, edit func(*deletion.RunnerConfig)) (*deletion.Runner, *deletion.Service) {
	t.Helper()
	reg := deletion.NewRegistry(src, func() int { return 4 })
	r := deletion.NewRunner(st, reg, owner, func() deletion.RunnerConfig {
		c := runnerConfig()
		if edit != nil {
			edit(&c)
		}
		return c
	}, hclog.NewNullLogger(), nil, nil)
	require.NoError(t, r.Start(testsvc.Context(t, time.Minute)))
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	return r, deletion.NewService(st, reg, r, deletion.ServiceOptions{Config: func() deletion.ServiceConfig {
		return deletion.ServiceConfig{TenantIDFormat: "uuid", GracePeriod: grace}
	}})
}

func sumOf(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// TestCancelStopsARunningJobWithinOneBatch: cancelling a running job stops
// its deleter before its next batch; the job ends CANCELLED, its report
// says exactly what is gone (a count after the stop, so also the batch
// whose result the cancel cut off), the other tenant keeps every row, and
// the job never runs again.
func TestCancelStopsARunningJobWithinOneBatch(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, st store.Store) {
		tenant, other := uuid.NewString(), uuid.NewString()
		d := newBatchDeleter(10, 20*time.Millisecond)
		d.seed(tenant, map[string]int64{"public.steps": 300, "public.instances": 200})
		d.seed(other, map[string]int64{"public.steps": 50})
		uid := int64(1001)
		// A lease that outlives a slow heartbeat on a loaded machine: the
		// cancel must find the job held (RUNNING), not abandoned.
		_, svc := daemonOf(t, st, batchDeleters{"postgres:app": d}, "d1", 0, func(c *deletion.RunnerConfig) { c.Lease = 10 * time.Second })
		job, _, err := svc.StartDeletion(ctx, tenant, deletion.StartOptions{})
		require.NoError(t, err)
		waitFor(t, st, tenant, func(j *deletion.Job) bool { return j.Status == deletion.JobRunning && j.Deleters[0].DeletedCount >= 30 }, "deleting")

		got, outcome, err := svc.Cancel(ctx, tenant, &uid)
		require.NoError(t, err)
		// Cancel has stopped the attempt's context when it returns (the
		// request reached the daemon that runs the job): from then on only
		// the batch in flight may end. Batches while the cancel was being
		// stored do not count against the plugin.
		before := d.batches.Load()
		require.Equal(t, deletion.CancelRequested, outcome)
		require.Equal(t, job.ID, got.ID)
		done := waitFor(t, st, tenant, func(j *deletion.Job) bool { return j.Status == deletion.JobCancelled }, "cancelled")
		require.LessOrEqual(t, d.batches.Load()-before, int64(1), "the deleter stops within one batch")

		left := d.left(tenant)
		require.Greater(t, sumOf(left), int64(0), "stopped before the end")
		dj := adminapi.JobBody(done)
		require.Equal(t, deletion.DeleterCancelled, dj.Deleters[0].Status)
		require.Equal(t, 500-sumOf(left), dj.Deleters[0].DeletedCount, "exact: what the store lost")
		require.Equal(t, map[string]int64{"public.steps": 300 - left["public.steps"], "public.instances": 200 - left["public.instances"]},
			dj.Report.Cancelled["postgres:app"].Breakdown)
		require.Equal(t, uid, *dj.CancelledByUID)
		require.NotNil(t, dj.FinishedAt)
		require.Nil(t, dj.NextAttemptAt)
		require.Contains(t, dj.LastError, "cancelled")
		require.Equal(t, map[string]int64{"public.steps": 50}, d.left(other), "the other tenant is untouched")

		time.Sleep(10 * runnerConfig().PollInterval)
		require.Equal(t, left, d.left(tenant), "a cancelled job never runs again")
		latest, err := st.LatestDeletionJob(ctx, tenant)
		require.NoError(t, err)
		require.Equal(t, deletion.JobCancelled, latest.Status)
		_, _, err = svc.Cancel(ctx, tenant, &uid)
		require.ErrorIs(t, err, derrors.ErrConflict)
	})
}

// TestCancelReachesTheDaemonThatRunsTheJob: the cancel arrives at another
// daemon of the PostgreSQL store; the one running the job sees it at its
// next heartbeat and stops.
func TestCancelReachesTheDaemonThatRunsTheJob(t *testing.T) {
	dsn := storetest.DSN(t, migrations.Postgres)
	stA, stB := storetest.OpenDSN(t, migrations.Postgres, dsn), storetest.OpenDSN(t, migrations.Postgres, dsn)
	ctx := testsvc.Context(t, time.Minute)
	tenant := uuid.NewString()
	d := newBatchDeleter(10, 20*time.Millisecond)
	d.seed(tenant, map[string]int64{"t": 1000})
	_, svcA := daemonOf(t, stA, batchDeleters{"x": d}, "a", 0, nil)
	// Daemon B runs no job: its service only answers the API.
	_, svcB := daemonOf(t, stB, batchDeleters{"x": d}, "b", 0, func(c *deletion.RunnerConfig) { c.PollInterval = time.Hour })
	_, _, err := svcA.StartDeletion(ctx, tenant, deletion.StartOptions{})
	require.NoError(t, err)
	waitFor(t, stA, tenant, func(j *deletion.Job) bool { return j.Deleters[0].DeletedCount >= 30 }, "deleting")
	_, outcome, err := svcB.Cancel(ctx, tenant, nil)
	require.NoError(t, err)
	require.Equal(t, deletion.CancelRequested, outcome)
	requested := time.Now()
	done := waitFor(t, stB, tenant, func(j *deletion.Job) bool { return j.Status == deletion.JobCancelled }, "cancelled")
	require.Less(t, time.Since(requested), 2*time.Second, "within a heartbeat and a batch")
	require.Equal(t, 1000-sumOf(d.left(tenant)), done.Deleters[0].DeletedCount)
}

// TestScheduledJobStartsOnTime: with a grace period the job waits in
// SCHEDULED, runs nothing before its time, and starts then; a request may
// ask for later, never for sooner.
func TestScheduledJobStartsOnTime(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, st store.Store) {
		tenant := uuid.NewString()
		d := newBatchDeleter(100, time.Millisecond)
		d.seed(tenant, map[string]int64{"t": 250})
		const grace = 1500 * time.Millisecond
		_, svc := daemonOf(t, st, batchDeleters{"x": d}, "d1", grace, nil)

		asked := time.Now()
		soon := asked.Add(100 * time.Millisecond)
		job, created, err := svc.StartDeletion(ctx, tenant, deletion.StartOptions{NotBefore: &soon})
		answered := time.Now()
		require.NoError(t, err)
		require.True(t, created)
		require.Equal(t, deletion.JobScheduled, job.Status)
		// The grace period wins over a sooner time: not_before is the
		// request's time plus the grace period (stored to the microsecond).
		require.False(t, job.NotBefore.Before(asked.Add(grace).Truncate(time.Microsecond)), "not_before %s, asked at %s", job.NotBefore, asked)
		require.False(t, job.NotBefore.After(answered.Add(grace)), "not_before %s, answered at %s", job.NotBefore, answered)
		time.Sleep(grace / 2)
		require.Zero(t, d.batches.Load(), "nothing runs before not_before")
		sameJob, created, err := svc.StartDeletion(ctx, tenant, deletion.StartOptions{})
		require.NoError(t, err)
		require.False(t, created)
		require.Equal(t, job.ID, sameJob.ID, "a scheduled job is the tenant's active job")

		done := waitFor(t, st, tenant, completed, "completed")
		require.False(t, done.StartedAt.Before(*job.NotBefore), "started %s, not before %s", done.StartedAt, job.NotBefore)
		require.Less(t, done.StartedAt.Sub(*job.NotBefore), time.Second, "and on time")
		require.EqualValues(t, 250, adminapi.JobBody(done).Report.Succeeded["x"].DeletedCount)

		later := time.Now().Add(time.Hour)
		other := uuid.NewString()
		job, _, err = svc.StartDeletion(ctx, other, deletion.StartOptions{NotBefore: &later})
		require.NoError(t, err)
		require.WithinDuration(t, later, *job.NotBefore, time.Millisecond, "a later time than the grace period is kept")
		tooLate := time.Now().Add(deletion.MaxSchedule + time.Hour)
		_, _, err = svc.StartDeletion(ctx, uuid.NewString(), deletion.StartOptions{NotBefore: &tooLate})
		require.ErrorIs(t, err, derrors.ErrInvalid)
	})
}

// TestScheduledJobSurvivesARestart: the daemon that took the request stops
// before the job's time; the one that starts next runs it on time.
func TestScheduledJobSurvivesARestart(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, st store.Store) {
		tenant := uuid.NewString()
		d := newBatchDeleter(100, time.Millisecond)
		d.seed(tenant, map[string]int64{"t": 120})
		first, svc := daemonOf(t, st, batchDeleters{"x": d}, "d1", time.Second, nil)
		job, _, err := svc.StartDeletion(ctx, tenant, deletion.StartOptions{})
		require.NoError(t, err)
		require.NoError(t, first.Stop(ctx))
		time.Sleep(1500 * time.Millisecond)
		require.Zero(t, d.batches.Load(), "no daemon runs")
		still, err := st.LatestDeletionJob(ctx, tenant)
		require.NoError(t, err)
		require.Equal(t, deletion.JobScheduled, still.Status, "overdue, waiting for a daemon")

		daemonOf(t, st, batchDeleters{"x": d}, "d2", time.Second, nil)
		done := waitFor(t, st, tenant, completed, "completed after the restart")
		require.Equal(t, job.ID, done.ID)
		require.False(t, done.StartedAt.Before(*job.NotBefore))
	})
}
