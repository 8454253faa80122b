package dlq_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/bulk"
	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

// TestAnOperationTakenOverDuringASendKeepsTheAcks: daemon A loses a bulk
// retry's lease to daemon B while A's page is with the broker (A stalled
// past the lease: a long GC pause, a slow broker). The broker acknowledged
// the page, so its messages are RESOLVED and B does not send them again.
// Before, A's acknowledged outcomes were recorded with the page's
// progress in one transaction, which failed on the lost lease and took the
// outcomes with it: the messages stayed RETRYING (SQLite) or PENDING
// (PostgreSQL), and B sent each a second time.
func TestAnOperationTakenOverDuringASendKeepsTheAcks(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, 2*time.Minute)
		ids := f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 5)
		others := f.ingestTo(t, "billing.dlq.v1", "billing.events.v1", "boom", 100, 3)
		before := f.checksums(t)

		bb := newBroker()
		b := newPeer(t, f, nil, bb, "daemon-b")
		stall := stallA(f)
		startRunner(t, f.ops)
		t.Cleanup(stall.let)
		op := retryOrders(t, ctx, f.ops, 0)
		<-stall.started // A is stalled with the page; its operation lease runs out
		require.NoError(t, b.runner.Start(ctx))
		takeOver(t, f, b, op.ID)
		stall.let()

		done := waitOperation(t, f.ops, op.ID, finished, "completed")
		require.Equal(t, dlq.OperationCompleted, done.State)
		require.Equal(t, map[string]int64{dlq.ItemRetried: 5}, done.Outcomes, "the messages A sent are counted as retried")
		counts := sends(f.broker, bb)
		for _, id := range ids {
			require.Equal(t, dlq.StatusResolved, f.get(t, id).Status)
			require.Equal(t, 1, counts[id.String()], "sent once")
		}
		f.requireUntouched(t, before, others)
	})
}

// TestADaemonStalledPastTheLeaseWithAPage: [retry] lease is both the
// operation's lease and the messages' claim lease. A daemon stalled past it
// with a page at the broker loses both alike. On PostgreSQL the claim is a
// row lock held to the outcome, and the page is sent once; on SQLite it is
// a lease, and a daemon stalled past it is taken for a dead one: its
// messages may be sent a second time (at least once, as documented), and
// are counted once.
func TestADaemonStalledPastTheLeaseWithAPage(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		f.policy.Lease = 2 * time.Second // as the runner's operation lease, as in production
		ctx := testsvc.Context(t, 2*time.Minute)
		ids := f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 5)
		others := f.ingestTo(t, "billing.dlq.v1", "billing.events.v1", "boom", 100, 3)
		before := f.checksums(t)
		bb := newBroker()
		b := newPeer(t, f, nil, bb, "daemon-b")
		stall := stallA(f)
		startRunner(t, f.ops)
		t.Cleanup(stall.let) // first: the runners' Stop waits for A's pages
		op := retryOrders(t, ctx, f.ops, 0)
		<-stall.started
		require.NoError(t, b.runner.Start(ctx))
		// A stays stalled while the clock passes the lease: B takes the
		// operation over and goes to the page.
		takeOver(t, f, b, op.ID)
		if _, rowLocks := f.store.(*store.Postgres); rowLocks {
			atThePages(t, b, op.ID, 1) // where it waits for A's row locks
		} else {
			// A's stall outlasts its claims too (its renewals stall with
			// it): B takes A for a dead daemon and sends the page. (The
			// clock outruns B's operation lease as well, and B's progress
			// may be lost to A's runner.)
			f.clock.stall(5 * time.Second)
			b.sig.PageTried.WaitFor(t, "B sent the page", func(try bulk.PageTry) bool { return try.Later == 0 })
			require.Len(t, republishCounts(bb), len(ids), "B sent the page")
		}
		stall.let()
		// Time goes on while it ends, as it would in a daemon (the
		// claims of messages run out); a run that ends on the lost lease
		// hands back what A's runner took back meanwhile
		// (TestARunThatLostItsLeaseHandsBackWhatItsRunnerTookBack).
		done := f.finishedAsTimeGoesOn(t, ctx, op.ID)
		counts := sends(f.broker, bb)
		for _, id := range ids {
			require.Equal(t, dlq.StatusResolved, f.get(t, id).Status)
			requireSends(t, f, counts[id.String()], "%s (A %d, B %d)", id, republishCounts(f.broker)[id.String()], republishCounts(bb)[id.String()])
		}
		require.Equal(t, dlq.OperationCompleted, done.State)
		require.EqualValues(t, 5, done.Done, "each message counted once")
		if _, rowLocks := f.store.(*store.Postgres); rowLocks {
			require.Equal(t, map[string]int64{dlq.ItemRetried: 5}, done.Outcomes)
		} else {
			// The test's clock outran every claim (B's too): an
			// acknowledgement that came after its claim had run out is
			// not_recorded, whoever's it was.
			for outcome := range done.Outcomes {
				require.Contains(t, []string{dlq.ItemRetried, dlq.ItemNotRecorded}, outcome)
			}
		}
		f.requireUntouched(t, before, others)
	})
}

// TestATakeoverWithFourPagesAtTheBroker: four pages (90 messages, pages of
// 25) at the
// broker at once when B takes over; some are refused on their last attempt
// (DEAD), some refused with attempts left, the rest acknowledged. Each is
// sent once and counted once: a refused one was sent again by B, and on
// SQLite one whose refusal A recorded between B's claim and B's read was
// counted as skipped for good.
func TestATakeoverWithFourPagesAtTheBroker(t *testing.T) {
	each2(t, func(t *testing.T, f *fixture, stB store.Store) {
		ctx := testsvc.Context(t, 3*time.Minute)
		ids := f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 85)
		// last-attempt messages: max_retries 1
		f.policy.MaxRetries = 1
		last := f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 2000, 5)
		f.policy.MaxRetries = 3
		others := f.ingestTo(t, "billing.dlq.v1", "billing.events.v1", "boom", 100, 3)
		before := f.checksums(t)
		refusedLeft := map[string]bool{}
		for i, id := range ids {
			if i%10 == 3 {
				refusedLeft[id.String()] = true
			}
		}
		bb := newBroker()
		for _, br := range []*broker{f.broker, bb} {
			for id := range refusedLeft {
				br.refuse[id] = sdk.Permanent(fmt.Errorf("refused %s", id))
			}
			for _, id := range last {
				br.refuse[id.String()] = sdk.Permanent(fmt.Errorf("refused %s", id))
			}
		}
		b := newPeer(t, f, stB, bb, "daemon-b")
		pagesOf25(f.ops, b.ops)
		stall := stallA(f)
		a := startA(t, f)
		t.Cleanup(stall.let) // first: the runners' Stop waits for A's pages
		op := retryOrders(t, ctx, f.ops, 0)
		require.EqualValues(t, 90, op.Matched)
		waitFor(t, 30*time.Second, "four pages at the broker", func() bool { return stall.inFlight.Load() == 4 })
		require.NoError(t, b.runner.Start(ctx))
		takeOver(t, f, b, op.ID)
		atThePages(t, b, op.ID, 4)
		stall.let()
		waitOperation(t, f.ops, op.ID, finished, "finished")
		settled(t, a, b)
		done, err := f.ops.Operation(ctx, op.ID)
		require.NoError(t, err)
		counts := sends(f.broker, bb)
		acked := 0
		attempts := map[int]int{} // refused messages with attempts left, by retry_count
		for _, id := range ids {
			m := f.get(t, id)
			if refusedLeft[id.String()] {
				require.Equal(t, dlq.StatusPending, m.Status)
				attempts[m.RetryCount]++
				continue
			}
			acked++
			require.Equal(t, dlq.StatusResolved, m.Status)
			require.Equal(t, 1, counts[id.String()], "sent once")
		}
		for _, id := range last {
			require.Equal(t, dlq.StatusDead, f.get(t, id).Status)
		}
		require.Equal(t, dlq.OperationCompleted, done.State)
		fails, err := f.ops.OperationFailures(ctx, op.ID, 1000)
		require.NoError(t, err)
		isLast := map[uuid.UUID]bool{}
		for _, id := range last {
			isLast[id] = true
		}
		kinds := map[string]int{}
		for _, r := range fails {
			kind := "refused-left"
			if isLast[r.ID] {
				kind = "last"
			}
			if r.Outcome == dlq.ItemSkipped {
				m := f.get(t, r.ID)
				a := m.Attempts[len(m.Attempts)-1]
				if kinds[kind+"/skipped"] == 0 {
					t.Logf("skipped %s: error %q; message %s retry_count %d/%d, last attempt %s op %v", kind, r.Error, m.Status, m.RetryCount, m.MaxRetries, a.Outcome, a.Operation)
				}
			}
			kinds[kind+"/"+r.Outcome]++
		}
		t.Logf("failures by kind: %v", kinds)
		require.Equal(t, map[string]int64{dlq.ItemRetried: int64(acked), dlq.ItemRefused: int64(len(refusedLeft) + len(last))}, done.Outcomes)
		require.EqualValues(t, 90, done.Done)
		require.EqualValues(t, acked, done.Succeeded)
		require.EqualValues(t, 90-acked, done.Failed)
		f.requireUntouched(t, before, others)
		require.Equal(t, map[int]int{1: len(refusedLeft)}, attempts, "a refused message is tried once by the operation")
	})
}

// TestARetryAllTakenOver: a retry-all (the request runs the operation
// itself, under [retry] lease) taken over while three pages are at the
// broker; sent once on PostgreSQL, at most twice on SQLite (see
// TestADaemonStalledPastTheLeaseWithAPage), counted once.
func TestARetryAllTakenOver(t *testing.T) {
	each2(t, func(t *testing.T, f *fixture, stB store.Store) {
		ctx := testsvc.Context(t, 2*time.Minute)
		ids := f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 60)
		others := f.ingestTo(t, "billing.dlq.v1", "billing.events.v1", "boom", 100, 3)
		before := f.checksums(t)
		bb := newBroker()
		b := newPeer(t, f, stB, bb, "daemon-b")
		pagesOf25(f.ops, b.ops)
		stall := stallA(f)
		t.Cleanup(stall.let)
		type result struct {
			r   bulk.RetryAllResult
			err error
		}
		out := make(chan result, 1)
		go func() {
			r, err := f.ops.RetryAll(ctx, "orders.dlq.v1")
			out <- result{r, err}
		}()
		waitFor(t, 30*time.Second, "three pages at the broker", func() bool { return stall.inFlight.Load() == 3 })
		ops, err := f.ops.Operations(ctx, 10, true)
		require.NoError(t, err)
		require.Len(t, ops, 1)
		require.NoError(t, b.runner.Start(ctx))
		takeOver(t, f, b, ops[0].ID)
		atThePages(t, b, ops[0].ID, 3)
		stall.let()
		r := <-out
		t.Logf("retry-all answered %+v, %v", r.r, r.err)
		done := waitOperation(t, f.ops, ops[0].ID, finished, "finished")
		counts := sends(f.broker, bb)
		for _, id := range ids {
			require.Equal(t, dlq.StatusResolved, f.get(t, id).Status)
			requireSends(t, f, counts[id.String()], "%s", id)
		}
		require.Equal(t, dlq.OperationCompleted, done.State)
		require.Equal(t, map[string]int64{dlq.ItemRetried: 60}, done.Outcomes)
		require.EqualValues(t, 60, done.Done)
		f.requireUntouched(t, before, others)
	})
}

// TestATakeoverWhileASourceIsDown: messages of a second source whose broker
// is down during the takeover (for A and for B), up again later.
func TestATakeoverWhileASourceIsDown(t *testing.T) {
	each2(t, func(t *testing.T, f *fixture, stB store.Store) {
		ctx := testsvc.Context(t, 3*time.Minute)
		ids := f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 20)
		var ids2 []uuid.UUID
		{
			batch := make([]dlq.Incoming, 10)
			for i := range batch {
				batch[i] = dlq.Incoming{Position: dlq.Position{Source: "kafka2", Topic: "orders.dlq.v1", Offset: int64(500 + i)},
					OriginalTopic: "orders.events.v1", ErrorMessage: "boom", Payload: []byte(fmt.Sprintf(`{"m":%d}`, i))}
			}
			_, err := f.store.IngestDLQ(ctx, batch, dlq.IngestOptions{Now: f.clock.now(), MaxRetries: 3})
			require.NoError(t, err)
			page, err := f.store.SearchDLQ(ctx, dlq.SearchFilter{Topic: "orders.dlq.v1", Limit: 1000})
			require.NoError(t, err)
			for _, m := range page.Messages {
				if m.Position.Source == "kafka2" {
					ids2 = append(ids2, m.ID)
				}
			}
			require.Len(t, ids2, 10)
		}
		others := f.ingestTo(t, "billing.dlq.v1", "billing.events.v1", "boom", 100, 3)
		before := f.checksums(t)
		downA, downB, bb := newBroker(), newBroker(), newBroker()
		downA.down = fmt.Errorf("kafka2 unreachable")
		downB.down = fmt.Errorf("kafka2 unreachable")
		f.svc = dlq.NewService(f.store, multi{"kafka": f.broker, "kafka2": downA}, func() dlq.Policy { return f.policy }, "daemon-a",
			daemonLog(t, "daemon-a"), dlq.NewMetrics(nil, f.store, nil, periodic.New(nil)))
		dlq.SetClock(f.svc, f.clock.now)
		f.ops = bulk.NewService(f.svc, f.store, daemonLog(t, "daemon-a"))
		daemonB := dlq.NewService(stB, multi{"kafka": bb, "kafka2": downB}, func() dlq.Policy { return f.policy }, "daemon-b",
			daemonLog(t, "daemon-b"), dlq.NewMetrics(nil, stB, nil, periodic.New(nil)))
		dlq.SetClock(daemonB, f.clock.now)
		opsB := bulk.NewService(daemonB, stB, daemonLog(t, "daemon-b"))
		runnerB := bulk.NewRunner(opsB, func() bulk.Config {
			return bulk.Config{PollInterval: 20 * time.Millisecond, Lease: 2 * time.Second, MaxRunning: 2}
		}, nil)
		t.Cleanup(func() { _ = runnerB.Stop(context.Background()) })
		b := &peer{name: "daemon-b", ops: opsB, runner: runnerB, sig: opsB.Signals()}
		stall := stallA(f)
		a := startA(t, f)
		t.Cleanup(stall.let)
		op := retryOrders(t, ctx, f.ops, 0)
		<-stall.started
		require.NoError(t, runnerB.Start(ctx))
		takeOver(t, f, b, op.ID)
		atThePages(t, b, op.ID, 1)
		stall.let()
		// Both find kafka2 down: A sending the page, B trying again what A
		// could not send.
		a.sig.PageTried.WaitFor(t, "A's page came back", func(try bulk.PageTry) bool { return try.Operation == op.ID })
		b.sig.PageTried.WaitFor(t, "B found kafka2 down", func(try bulk.PageTry) bool { return errors.Is(try.Err, derrors.ErrUnavailable) })
		downB.set(func(b *broker) { b.down = nil })
		downA.set(func(b *broker) { b.down = nil })
		done := f.finishedAsTimeGoesOn(t, ctx, op.ID)
		counts := sends(f.broker, bb, downA, downB)
		for _, id := range append(append([]uuid.UUID{}, ids...), ids2...) {
			require.Equal(t, dlq.StatusResolved, f.get(t, id).Status)
			require.Equal(t, 1, counts[id.String()])
		}
		require.Equal(t, dlq.OperationCompleted, done.State)
		require.Equal(t, map[string]int64{dlq.ItemRetried: 30}, done.Outcomes)
		require.EqualValues(t, 30, done.Done)
		f.requireUntouched(t, before, others)
	})
}

// TestAnOperationTakenOverTwice: A -> B -> C: B is pushed out too (the
// clock passes its lease) while A's page is still at the broker.
func TestAnOperationTakenOverTwice(t *testing.T) {
	each2(t, func(t *testing.T, f *fixture, stB store.Store) {
		ctx := testsvc.Context(t, 2*time.Minute)
		ids := f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 60)
		others := f.ingestTo(t, "billing.dlq.v1", "billing.events.v1", "boom", 100, 3)
		before := f.checksums(t)
		bb, bc := newBroker(), newBroker()
		b := newPeer(t, f, stB, bb, "daemon-b")
		c := newPeer(t, f, stB, bc, "daemon-c")
		pagesOf25(f.ops, b.ops, c.ops)
		stall := stallA(f)
		a := startA(t, f)
		t.Cleanup(stall.let)
		op := retryOrders(t, ctx, f.ops, 0)
		waitFor(t, 30*time.Second, "three pages at the broker", func() bool { return stall.inFlight.Load() == 3 })
		require.NoError(t, b.runner.Start(ctx))
		takeOver(t, f, b, op.ID)
		atThePages(t, b, op.ID, 3)
		require.NoError(t, c.runner.Start(ctx))
		takeOver(t, f, c, op.ID)
		atThePages(t, c, op.ID, 3)
		stall.let()
		waitOperation(t, f.ops, op.ID, finished, "finished")
		settled(t, a, b, c)
		done, err := f.ops.Operation(ctx, op.ID)
		require.NoError(t, err)
		counts := sends(f.broker, bb, bc)
		for _, id := range ids {
			require.Equal(t, dlq.StatusResolved, f.get(t, id).Status)
			require.Equal(t, 1, counts[id.String()], "A %d B %d C %d", republishCounts(f.broker)[id.String()],
				republishCounts(bb)[id.String()], republishCounts(bc)[id.String()])
		}
		require.Equal(t, dlq.OperationCompleted, done.State)
		require.Equal(t, map[string]int64{dlq.ItemRetried: 60}, done.Outcomes)
		require.EqualValues(t, 60, done.Done)
		f.requireUntouched(t, before, others)
	})
}
