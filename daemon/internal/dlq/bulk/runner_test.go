package bulk_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/bulk"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/dlqtest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// lingeringRenewals is a store whose operation lease renewals, like a
// driver slow to give up, return only a while after their context ended.
type lingeringRenewals struct {
	dlq.Store
	testsvc.Lingering
}

func (s *lingeringRenewals) RenewDLQOperationLease(ctx context.Context, _ uuid.UUID, _ string, _ time.Time) error {
	return s.Call(ctx)
}

// TestAStoppedRunnerLeavesNoStoreCallBehind: when the runner's Stop
// returns, nothing of its runs is still at the store (the heartbeat's
// renewal included): the daemon closes the store right after, and a call
// under way then wrote into a closed SQLite database's directory.
func TestAStoppedRunnerLeavesNoStoreCallBehind(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, time.Minute)
		st := &lingeringRenewals{Store: f.Store}
		svc, runner, op := startSlowRetry(t, ctx, f, st)
		testsvc.Eventually(t, 30*time.Second, func() bool { return st.Started.Load() > 0 }, "a renewal under way")
		require.NoError(t, runner.Stop(ctx))
		require.Zero(t, st.UnderWay.Load(), "a lease renewal still at the store after Stop returned")
		mid, err := svc.Operation(ctx, op.ID)
		require.NoError(t, err)
		require.Equal(t, dlq.OperationRunning, mid.State)
		require.Empty(t, mid.LeaseOwner, "handed back")
	})
}

// lateClaims is a store whose operation claims, once late is set, reach
// the database a while after they were made: a claim whose caller gave up
// (its context ended) still happens, as a statement already sent does on
// a busy server.
type lateClaims struct {
	dlq.Store
	late atomic.Bool
}

func (s *lateClaims) ClaimDLQOperation(ctx context.Context, owner string, now, until time.Time) (*dlq.Operation, error) {
	if !s.late.Load() {
		return s.Store.ClaimDLQOperation(ctx, owner, now, until)
	}
	return testsvc.Late(ctx, 300*time.Millisecond, func(ctx context.Context) (*dlq.Operation, error) {
		return s.Store.ClaimDLQOperation(ctx, owner, now, until)
	})
}

// TestAClaimUnderWayWhenTheRunnerStopsIsNotLeftHeld: the runner looks for
// more operations while it runs one; a stop that cut such a claim short
// (the claim went on at the database after the stop handed the running
// operation back) left the operation held by the stopped daemon, RUNNING
// with no run until that lease ran out (CI saw it as a takeover test that
// never took over).
func TestAClaimUnderWayWhenTheRunnerStopsIsNotLeftHeld(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, time.Minute)
		st := &lateClaims{Store: f.Store}
		svc, runner, op := startSlowRetry(t, ctx, f, st)
		dlqtest.WaitOperation(t, svc, op.ID, func(o *dlq.Operation) bool { return o.Done >= 1 }, "running")
		st.late.Store(true)
		time.Sleep(400 * time.Millisecond) // a claim is under way now, always
		require.NoError(t, runner.Stop(ctx))
		time.Sleep(500 * time.Millisecond) // a claim cut short would have happened by now
		mid, err := svc.Operation(ctx, op.ID)
		require.NoError(t, err)
		require.Equal(t, dlq.OperationRunning, mid.State)
		require.Empty(t, mid.LeaseOwner, "handed back, and not claimed again by the stopped runner")
	})
}

// startSlowRetry stores 40 dead letters and starts daemon-a on st (f's
// store, wrapped) with a bulk retry of them at 5/s (eight seconds) and its
// runner; it returns the daemon, the runner and the operation.
func startSlowRetry(t *testing.T, ctx context.Context, f *dlqtest.Fixture, st dlq.Store) (*bulk.Service, *bulk.Runner, *dlq.Operation) {
	t.Helper()
	f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 40)
	svc, runner := daemon(t, f, st, f.Broker, "daemon-a")
	op, err := svc.StartOperation(ctx, bulk.Request{Action: dlq.ActionRetry, Rate: 5,
		Filter: dlq.OperationFilter{Search: dlq.SearchFilter{Topic: "orders.dlq.v1"}}})
	require.NoError(t, err)
	require.NoError(t, runner.Start(ctx))
	return svc, runner, op
}
