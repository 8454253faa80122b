package bulk_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/bulk"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/dlqtest"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// TestACancelWhileTheBrokerHasAPageCountsItsAcks: a daemon stalled past
// the operation's lease with its page at the broker; the operation is
// cancelled (no live lease: cancelled at once). The broker acknowledges the
// page: its messages are RESOLVED by the operation, which counts them.
// They were RESOLVED and not counted.
func TestACancelWhileTheBrokerHasAPageCountsItsAcks(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, 2*time.Minute)
		ids := f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 5)
		stall := stallA(t, f)
		a := startA(t, f)
		t.Cleanup(stall.let) // first: the runners' Stop waits for A's pages
		op := retryOrders(t, ctx, f.Ops, 0)
		<-stall.started
		other, _ := daemon(t, f, nil, dlqtest.NewBroker(), "daemon-b")
		for {
			// past the 2 s operation lease (A's heartbeat may renew it in
			// between: a cancel is then only requested), not the 30 s claim
			f.Clock.Set(f.Clock.Now().Add(5 * time.Second))
			c, err := other.CancelOperation(ctx, op.ID, nil)
			require.NoError(t, err)
			t.Logf("after cancel: state=%s", c.State)
			if c.State == dlq.OperationCancelled {
				break
			}
		}
		stall.let()
		waitFor(t, 30*time.Second, "A's page recorded", func() bool { return f.Get(t, ids[4]).Status == dlq.StatusResolved })
		settled(t, a)
		done := dlqtest.WaitOperation(t, f.Ops, op.ID, dlqtest.Finished, "dlqtest.Finished")
		counts := dlqtest.RepublishCounts(f.Broker)
		for _, id := range ids {
			require.Equal(t, dlq.StatusResolved, f.Get(t, id).Status)
			require.Equal(t, 1, counts[id.String()])
		}
		require.Equal(t, dlq.OperationCancelled, done.State)
		require.Equal(t, map[string]int64{dlq.ItemRetried: 5}, done.Outcomes, "the 5 messages the operation resolved are counted")
		require.EqualValues(t, 5, done.Done)
		require.EqualValues(t, 5, done.Succeeded)
	})
}

// TestATakenOverOperationCancelledBeforeTheOldPageEnds: B takes the
// operation over while A's page is at the broker, and B is cancelled before
// A's page is recorded; A's acknowledged messages are counted (on SQLite
// they were not).
func TestATakenOverOperationCancelledBeforeTheOldPageEnds(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, 2*time.Minute)
		ids := f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 5)
		bb := dlqtest.NewBroker()
		b := newPeer(t, f, nil, bb, "daemon-b")
		stall := stallA(t, f)
		a := startA(t, f)
		t.Cleanup(stall.let) // first: the runners' Stop waits for A's pages
		op := retryOrders(t, ctx, f.Ops, 0)
		<-stall.started
		require.NoError(t, b.runner.Start(ctx))
		takeOver(t, f, b, op.ID)
		atThePages(t, b, op.ID, 1)
		_, err := b.ops.CancelOperation(ctx, op.ID, nil)
		require.NoError(t, err)
		if _, rowLocks := f.Store.(*store.Postgres); !rowLocks {
			// B's run stops at once and records the cancel; on PostgreSQL
			// its page waits for A's row locks, and the run with it.
			dlqtest.WaitOperation(t, f.Ops, op.ID, dlqtest.Finished, "B recorded the cancel before A's page")
		}
		stall.let()
		waitFor(t, 30*time.Second, "A's page recorded", func() bool { return f.Get(t, ids[4]).Status == dlq.StatusResolved })
		dlqtest.WaitOperation(t, f.Ops, op.ID, dlqtest.Finished, "dlqtest.Finished")
		settled(t, a, b)
		done, err := f.Ops.Operation(ctx, op.ID)
		require.NoError(t, err)
		counts := sends(f.Broker, bb)
		for _, id := range ids {
			require.Equal(t, dlq.StatusResolved, f.Get(t, id).Status)
			require.Equal(t, 1, counts[id.String()])
		}
		// COMPLETED is right too when the set was read to its end before the cancel.
		require.Contains(t, []dlq.OperationState{dlq.OperationCancelled, dlq.OperationCompleted}, done.State)
		require.Equal(t, map[string]int64{dlq.ItemRetried: 5}, done.Outcomes, "the 5 messages the operation resolved are counted (state %s)", done.State)
	})
}

// TestACancelAfterTheAnswersBeforeTheNewOwnerCountsThem: A's page is
// answered after A lost the operation to B (the answers kept in the
// items), then the operation is cancelled while B waits to try those items
// again (they were under A's claim at B's last try). A's acknowledged
// messages are counted, as when the cancel comes before A's record. They
// were RESOLVED and not counted (SQLite).
func TestACancelAfterTheAnswersBeforeTheNewOwnerCountsThem(t *testing.T) {
	each2(t, func(t *testing.T, f *dlqtest.Fixture, stB store.Store) {
		ctx := testsvc.Context(t, 2*time.Minute)
		ids := f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 5)
		bb := dlqtest.NewBroker()
		b := newPeer(t, f, stB, bb, "daemon-b")
		stall := stallA(t, f)
		a := startA(t, f)
		t.Cleanup(stall.let)
		op := retryOrders(t, ctx, f.Ops, 0)
		<-stall.started
		require.NoError(t, b.runner.Start(ctx))
		takeOver(t, f, b, op.ID)
		_, pg := f.Store.(*store.Postgres)
		if !pg {
			b.sig.PageTried.WaitFor(t, "B found the items under A's claim", func(try bulk.PageTry) bool { return try.Later > 0 })
		}
		stall.let()
		waitFor(t, 30*time.Second, "A's page recorded", func() bool { return f.Get(t, ids[4]).Status == dlq.StatusResolved })
		c, err := b.ops.CancelOperation(ctx, op.ID, nil)
		if pg && err != nil {
			t.Logf("cancel on postgres: %v (B counted A's page from its answers first)", err)
		} else {
			require.NoError(t, err)
			t.Logf("cancel: state=%s", c.State)
		}
		dlqtest.WaitOperation(t, f.Ops, op.ID, dlqtest.Finished, "dlqtest.Finished")
		settled(t, a, b)
		done, err := f.Ops.Operation(ctx, op.ID)
		require.NoError(t, err)
		counts := sends(f.Broker, bb)
		for _, id := range ids {
			require.Equal(t, dlq.StatusResolved, f.Get(t, id).Status)
			require.Equal(t, 1, counts[id.String()])
		}
		t.Logf("state %s outcomes %v done %d succeeded %d", done.State, done.Outcomes, done.Done, done.Succeeded)
		require.Equal(t, map[string]int64{dlq.ItemRetried: 5}, done.Outcomes, "the 5 messages the operation resolved are counted (state %s)", done.State)
		require.EqualValues(t, 5, done.Done)
	})
}

// TestALatePageOverlappingTheNewOwnersCountsTheRest: A's page holds one
// RESOLVED message (skipped, not retryable) besides 4 it sends. B takes
// over, counts the skipped one (the others are under A's claim), and is
// cancelled; A's page is then recorded into the ended operation. Its
// items B did not count are counted; the whole page was refused for the
// one overlap, and the 4 acknowledgements not counted (SQLite).
func TestALatePageOverlappingTheNewOwnersCountsTheRest(t *testing.T) {
	each2(t, func(t *testing.T, f *dlqtest.Fixture, stB store.Store) {
		ctx := testsvc.Context(t, 2*time.Minute)
		ids := f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 5)
		_, err := f.Svc.Retry(ctx, ids[0])
		require.NoError(t, err)
		require.Equal(t, dlq.StatusResolved, f.Get(t, ids[0]).Status)
		bb := dlqtest.NewBroker()
		b := newPeer(t, f, stB, bb, "daemon-b")
		stall := stallA(t, f)
		a := startA(t, f)
		t.Cleanup(stall.let)
		op := retryOrders(t, ctx, f.Ops, 0)
		t.Logf("matched %d", op.Matched)
		<-stall.started
		require.NoError(t, b.runner.Start(ctx))
		takeOver(t, f, b, op.ID)
		_, pg := f.Store.(*store.Postgres)
		if !pg {
			b.sig.PageTried.WaitFor(t, "B counted the skipped one, the others under A's claim", func(try bulk.PageTry) bool { return try.Later > 0 })
		} else {
			atThePages(t, b, op.ID, 1) // where it waits for A's row locks
		}
		c, err := b.ops.CancelOperation(ctx, op.ID, nil)
		require.NoError(t, err)
		t.Logf("cancel: state=%s", c.State)
		if !pg {
			dlqtest.WaitOperation(t, f.Ops, op.ID, dlqtest.Finished, "dlqtest.Finished before A's record")
		}
		stall.let()
		waitFor(t, 30*time.Second, "A's page recorded", func() bool { return f.Get(t, ids[4]).Status == dlq.StatusResolved })
		dlqtest.WaitOperation(t, f.Ops, op.ID, dlqtest.Finished, "dlqtest.Finished")
		settled(t, a, b)
		done, err := f.Ops.Operation(ctx, op.ID)
		require.NoError(t, err)
		t.Logf("state %s outcomes %v done %d succeeded %d", done.State, done.Outcomes, done.Done, done.Succeeded)
		counts := sends(f.Broker, bb)
		for _, id := range ids[1:] {
			require.Equal(t, dlq.StatusResolved, f.Get(t, id).Status)
			require.Equal(t, 1, counts[id.String()])
		}
		require.EqualValues(t, op.Matched, done.Done, "each item counted once")
		require.EqualValues(t, 4, done.Outcomes[dlq.ItemRetried], "the 4 messages the operation resolved are counted")
	})
}

// TestACancelBeforeARatedNewOwnerReachesTheAnsweredPages: a rated
// operation (1 msg/s: pages of one) with three of A's pages at the broker;
// B takes over, and its limiter reads a page a second. A's pages are
// recorded with their answers (lost), then the operation is cancelled
// before B's limiter reaches the later pages: the operation counts every
// message it resolved (it counted one, on both stores).
func TestACancelBeforeARatedNewOwnerReachesTheAnsweredPages(t *testing.T) {
	each2(t, func(t *testing.T, f *dlqtest.Fixture, stB store.Store) {
		ctx := testsvc.Context(t, 2*time.Minute)
		ids := f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 5)
		bb := dlqtest.NewBroker()
		b := newPeer(t, f, stB, bb, "daemon-b")
		stall := stallA(t, f)
		a := startA(t, f)
		t.Cleanup(stall.let)
		op := retryOrders(t, ctx, f.Ops, 1)
		waitFor(t, 30*time.Second, "three pages at the broker", func() bool { return stall.inFlight.Load() >= 3 })
		require.NoError(t, b.runner.Start(ctx))
		takeOver(t, f, b, op.ID)
		n := int(stall.inFlight.Load())
		stall.let()
		waitFor(t, 30*time.Second, "A's pages recorded", func() bool { return f.Get(t, ids[n-1]).Status == dlq.StatusResolved })
		_, cerr := b.ops.CancelOperation(ctx, op.ID, nil)
		t.Logf("A had %d pages at the broker; cancel: %v", n, cerr)
		dlqtest.WaitOperation(t, f.Ops, op.ID, dlqtest.Finished, "dlqtest.Finished")
		settled(t, a, b)
		done, err := f.Ops.Operation(ctx, op.ID)
		require.NoError(t, err)
		counts := sends(f.Broker, bb)
		resolved := 0
		for _, id := range ids {
			require.LessOrEqual(t, counts[id.String()], 1)
			if f.Get(t, id).Status == dlq.StatusResolved {
				resolved++
			}
		}
		t.Logf("state %s outcomes %v done %d; resolved %d", done.State, done.Outcomes, done.Done, resolved)
		require.EqualValues(t, resolved, done.Outcomes[dlq.ItemRetried], "every message the operation resolved is counted")
	})
}
