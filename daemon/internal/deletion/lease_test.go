package deletion_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/adminapi"
	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// stallingStore fails lease renewals while stalled, as a store too busy
// to answer would: the lease runs out under an attempt that still runs.
type stallingStore struct {
	store.Store
	stalled atomic.Bool
}

func (s *stallingStore) RenewDeletionLease(ctx context.Context, id uuid.UUID, owner string, until time.Time) error {
	if s.stalled.Load() {
		return errors.New("store busy")
	}
	return s.Store.RenewDeletionLease(ctx, id, owner, until)
}

// TestLapsedLeaseDoesNotRunAJobTwice: when a running job's lease lapses
// (renewals failed for longer than a lease) the runner that still runs it
// may claim it again, but must not start a second attempt beside the
// first: two attempts would delete side by side and report twice.
func TestLapsedLeaseDoesNotRunAJobTwice(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, st store.Store) {
		tenant, other := uuid.NewString(), uuid.NewString()
		d := newBatchDeleter(10, 20*time.Millisecond)
		d.seed(tenant, map[string]int64{"t": 1000})
		d.seed(other, map[string]int64{"t": 40})
		stalling := &stallingStore{Store: st}
		// Room for more jobs: the runner keeps claiming while it runs one.
		_, svc := daemonOf(t, stalling, batchDeleters{"x": d}, "d1", 0, func(c *deletion.RunnerConfig) { c.MaxJobs = 4 })
		_, _, err := svc.StartDeletion(ctx, tenant, deletion.StartOptions{})
		require.NoError(t, err)
		waitFor(t, st, tenant, func(j *deletion.Job) bool { return j.Deleters[0].DeletedCount >= 20 }, "deleting")
		stalling.stalled.Store(true)
		time.Sleep(2 * runnerConfig().Lease)
		stalling.stalled.Store(false)
		done := waitFor(t, st, tenant, completed, "completed")
		require.Equal(t, int32(1), d.maxRun.Load(), "one attempt deletes at a time")
		require.Equal(t, int64(1000), adminapi.JobBody(done).Deleters[0].DeletedCount)
		require.Equal(t, map[string]int64{"t": 40}, d.left(other), "the other tenant is untouched")
	})
}

// TestCancelledJobKeepsItsLeaseWhileSettling: after a cancel the runner
// counts what the stopped deleter left, which may take longer than a
// lease; it holds the lease meanwhile, so no runner ends the job as
// abandoned with the count the plugin could report before it stopped.
func TestCancelledJobKeepsItsLeaseWhileSettling(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, st store.Store) {
		tenant := uuid.NewString()
		d := newBatchDeleter(10, 20*time.Millisecond)
		d.seed(tenant, map[string]int64{"t": 1000})
		_, svc := daemonOf(t, st, batchDeleters{"x": d}, "d1", 0, nil)
		_, _, err := svc.StartDeletion(ctx, tenant, deletion.StartOptions{})
		require.NoError(t, err)
		waitFor(t, st, tenant, func(j *deletion.Job) bool { return j.Deleters[0].DeletedCount >= 30 }, "deleting")
		// Counts now take longer than a lease: settling outlasts it.
		d.countDelay.Store(int64(runnerConfig().Lease))
		_, outcome, err := svc.Cancel(ctx, tenant, nil)
		require.NoError(t, err)
		require.Equal(t, deletion.CancelRequested, outcome)
		done := waitFor(t, st, tenant, func(j *deletion.Job) bool { return j.Status == deletion.JobCancelled }, "cancelled")
		require.Equal(t, 1000-sumOf(d.left(tenant)), done.Deleters[0].DeletedCount, "exact: counted after the stop")
		require.Equal(t, deletion.DeleterCancelled, done.Deleters[0].Status)
	})
}

// TestAnAttemptThatLostItsLeaseHandsBackWhatItsRunnerTookBack: daemon d1's
// attempt loses the job to d2, which hands it back (as a daemon that stops
// does) while d1's deleter is still stopping; d1's runner claims the job
// again but starts no second attempt beside the one still running. That
// attempt then ends on its lost lease: it left the job RUNNING under the
// lease the claim took, with no attempt, until that lease (a minute here)
// ran out. It hands the job back now, due at once.
func TestAnAttemptThatLostItsLeaseHandsBackWhatItsRunnerTookBack(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, st store.Store) {
		tenant, other := uuid.NewString(), uuid.NewString()
		d := newBatchDeleter(10, 20*time.Millisecond)
		d.seed(tenant, map[string]int64{"t": 1000})
		d.seed(other, map[string]int64{"t": 40})
		d.slowStop = make(chan struct{})
		const lease = time.Minute
		_, svc := daemonOf(t, st, batchDeleters{"x": d}, "d1", 0, func(c *deletion.RunnerConfig) { c.Lease, c.MaxJobs = lease, 4 })
		letStop := sync.OnceFunc(func() { close(d.slowStop) })
		t.Cleanup(letStop) // first: the runner's Stop waits for the attempt
		_, _, err := svc.StartDeletion(ctx, tenant, deletion.StartOptions{})
		require.NoError(t, err)
		job := waitFor(t, st, tenant, func(j *deletion.Job) bool { return j.Deleters[0].DeletedCount >= 20 }, "deleting")
		// d2 takes the job, as if d1's lease had run out ...
		later := time.Now().Add(2 * lease)
		taken, err := st.ClaimDeletionJob(ctx, "d2", later, later.Add(lease), 0)
		require.NoError(t, err)
		require.NotNil(t, taken)
		require.Equal(t, job.ID, taken.ID)
		testsvc.Eventually(t, 20*time.Second, d.stopSeen.Load, "d1's attempt stopped on the lost lease")
		// ... and hands it back; d1's runner claims it again while its
		// attempt is still stopping.
		now := time.Now()
		require.NoError(t, st.FinishDeletionAttempt(ctx, job.ID, "d2", deletion.JobUpdate{Status: deletion.JobPartial,
			LastError: "interrupted by daemon shutdown", NextAttemptAt: &now, Now: now}))
		waitFor(t, st, tenant, func(j *deletion.Job) bool { return j.Status == deletion.JobRunning && j.Attempts == 3 }, "d1 claimed it again")
		letStop()
		done := waitFor(t, st, tenant, completed, "completed well within the lease")
		require.True(t, done.Verified)
		require.Equal(t, int64(0), sumOf(d.left(tenant)))
		require.Equal(t, int32(1), d.maxRun.Load(), "one attempt deletes at a time")
		require.Equal(t, map[string]int64{"t": 40}, d.left(other), "the other tenant is untouched")
	})
}

// lingeringRenewals is a store whose deletion lease renewals, like a
// driver slow to give up, return only a while after their context ended.
type lingeringRenewals struct {
	store.Store
	testsvc.Lingering
}

func (s *lingeringRenewals) RenewDeletionLease(ctx context.Context, _ uuid.UUID, _ string, _ time.Time) error {
	return s.Call(ctx)
}

// TestAStoppedRunnerLeavesNoStoreCallBehind: when the runner's Stop
// returns, nothing of its attempts is still at the store (the heartbeat's
// renewal included): the daemon closes the store right after.
func TestAStoppedRunnerLeavesNoStoreCallBehind(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, st store.Store) {
		lingering := &lingeringRenewals{Store: st}
		r, _ := startLongErasure(t, ctx, lingering)
		testsvc.Eventually(t, 20*time.Second, func() bool { return lingering.Started.Load() > 0 }, "a renewal under way")
		require.NoError(t, r.Stop(ctx))
		require.Zero(t, lingering.UnderWay.Load(), "a lease renewal still at the store after Stop returned")
	})
}

// lateJobClaims is a store whose job claims, once late is set, reach the
// database a while after they were made: a claim whose caller gave up
// (its context ended) still happens, as a statement already sent does on
// a busy server. While none is set, claims find nothing.
type lateJobClaims struct {
	store.Store
	none, late  atomic.Bool
	lateStarted atomic.Int32
}

func (s *lateJobClaims) ClaimDeletionJob(ctx context.Context, owner string, now, until time.Time, maxJobs int) (*deletion.Job, error) {
	if s.none.Load() {
		return nil, nil
	}
	if !s.late.Load() {
		return s.Store.ClaimDeletionJob(ctx, owner, now, until, maxJobs)
	}
	s.lateStarted.Add(1)
	return testsvc.Late(ctx, 300*time.Millisecond, func(ctx context.Context) (*deletion.Job, error) {
		return s.Store.ClaimDeletionJob(ctx, owner, now, until, maxJobs)
	})
}

// TestAClaimUnderWayWhenTheRunnerStopsIsNotLeftHeld: a stop that cut a
// claim short (the claim went on at the database after the stop) left the
// job it took RUNNING under the stopped daemon's lease, with no attempt,
// until that lease ran out.
func TestAClaimUnderWayWhenTheRunnerStopsIsNotLeftHeld(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, st store.Store) {
		claims := &lateJobClaims{Store: st}
		claims.none.Store(true) // the job waits, unclaimed
		r, tenant := startLongErasure(t, ctx, claims)
		time.Sleep(50 * time.Millisecond) // the job is due for any claim from now on
		claims.late.Store(true)
		claims.none.Store(false)
		// Stop while a claim that takes the job is under way.
		testsvc.Eventually(t, 20*time.Second, func() bool { return claims.lateStarted.Load() > 0 }, "a claim under way")
		require.NoError(t, r.Stop(ctx))
		time.Sleep(500 * time.Millisecond) // a claim cut short would have happened by now
		job := waitFor(t, st, tenant, func(*deletion.Job) bool { return true }, "read")
		require.NotEqual(t, deletion.JobRunning, job.Status, "handed back or never taken, not held by the stopped runner")
	})
}

// startLongErasure starts a runner on st with a one-minute lease and an
// erasure of a new tenant that takes it two seconds; it returns the
// runner and the tenant.
func startLongErasure(t *testing.T, ctx context.Context, st deletion.JobStore) (*deletion.Runner, string) {
	t.Helper()
	tenant := uuid.NewString()
	d := newBatchDeleter(10, 20*time.Millisecond)
	d.seed(tenant, map[string]int64{"t": 1000})
	r, svc := daemonOf(t, st, batchDeleters{"x": d}, "d1", 0, func(c *deletion.RunnerConfig) { c.Lease = time.Minute })
	_, _, err := svc.StartDeletion(ctx, tenant, deletion.StartOptions{})
	require.NoError(t, err)
	return r, tenant
}
