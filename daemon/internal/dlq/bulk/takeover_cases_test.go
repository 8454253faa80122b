package bulk_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/bulk"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/dlqtest"
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
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, 2*time.Minute)
		ids := f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 5)
		others := f.IngestTo(t, "billing.dlq.v1", "billing.events.v1", "boom", 100, 3)
		before := f.Checksums(t)

		bb := dlqtest.NewBroker()
		b := newPeer(t, f, nil, bb, "daemon-b")
		stall := stallA(t, f)
		dlqtest.StartRunner(t, f.Ops)
		t.Cleanup(stall.let)
		op := retryOrders(t, ctx, f.Ops, 0)
		<-stall.started // A is stalled with the page; its operation lease runs out
		require.NoError(t, b.runner.Start(ctx))
		takeOver(t, f, b, op.ID)
		stall.let()

		done := dlqtest.WaitOperation(t, f.Ops, op.ID, dlqtest.Finished, "completed")
		require.Equal(t, dlq.OperationCompleted, done.State)
		require.Equal(t, map[string]int64{dlq.ItemRetried: 5}, done.Outcomes, "the messages A sent are counted as retried")
		counts := sends(f.Broker, bb)
		for _, id := range ids {
			require.Equal(t, dlq.StatusResolved, f.Get(t, id).Status)
			require.Equal(t, 1, counts[id.String()], "sent once")
		}
		f.RequireUntouched(t, before, others)
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
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		f.Policy.Lease = 2 * time.Second // as the runner's operation lease, as in production
		ctx := testsvc.Context(t, 2*time.Minute)
		ids := f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 5)
		others := f.IngestTo(t, "billing.dlq.v1", "billing.events.v1", "boom", 100, 3)
		before := f.Checksums(t)
		bb := dlqtest.NewBroker()
		b := newPeer(t, f, nil, bb, "daemon-b")
		stall := stallA(t, f)
		dlqtest.StartRunner(t, f.Ops)
		t.Cleanup(stall.let) // first: the runners' Stop waits for A's pages
		op := retryOrders(t, ctx, f.Ops, 0)
		<-stall.started
		require.NoError(t, b.runner.Start(ctx))
		// A stays stalled while the clock passes the lease: B takes the
		// operation over and goes to the page.
		takeOver(t, f, b, op.ID)
		if _, rowLocks := f.Store.(*store.Postgres); rowLocks {
			atThePages(t, b, op.ID, 1) // where it waits for A's row locks
		} else {
			// A's stall outlasts its claims too (its renewals stall with
			// it): B takes A for a dead daemon and sends the page. (The
			// clock outruns B's operation lease as well, and B's progress
			// may be lost to A's runner.)
			f.Clock.Stall(5 * time.Second)
			b.sig.PageTried.WaitFor(t, "B sent the page", func(try bulk.PageTry) bool { return try.Later == 0 })
			require.Len(t, dlqtest.RepublishCounts(bb), len(ids), "B sent the page")
		}
		stall.let()
		// Time goes on while it ends, as it would in a daemon (the
		// claims of messages run out); a run that ends on the lost lease
		// hands back what A's runner took back meanwhile
		// (TestARunThatLostItsLeaseHandsBackWhatItsRunnerTookBack).
		done := finishedAsTimeGoesOn(t, ctx, f, op.ID)
		counts := sends(f.Broker, bb)
		for _, id := range ids {
			require.Equal(t, dlq.StatusResolved, f.Get(t, id).Status)
			requireSends(t, f, counts[id.String()], "%s (A %d, B %d)", id, dlqtest.RepublishCounts(f.Broker)[id.String()], dlqtest.RepublishCounts(bb)[id.String()])
		}
		require.Equal(t, dlq.OperationCompleted, done.State)
		require.EqualValues(t, 5, done.Done, "each message counted once")
		if _, rowLocks := f.Store.(*store.Postgres); rowLocks {
			require.Equal(t, map[string]int64{dlq.ItemRetried: 5}, done.Outcomes)
		} else {
			// The test's clock outran every claim (B's too): an
			// acknowledgement that came after its claim had run out is
			// not_recorded, whoever's it was.
			for outcome := range done.Outcomes {
				require.Contains(t, []string{dlq.ItemRetried, dlq.ItemNotRecorded}, outcome)
			}
		}
		f.RequireUntouched(t, before, others)
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
	each2(t, func(t *testing.T, f *dlqtest.Fixture, stB store.Store) {
		ctx := testsvc.Context(t, 3*time.Minute)
		ids := f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 85)
		// last-attempt messages: max_retries 1
		f.Policy.MaxRetries = 1
		last := f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 2000, 5)
		f.Policy.MaxRetries = 3
		others := f.IngestTo(t, "billing.dlq.v1", "billing.events.v1", "boom", 100, 3)
		before := f.Checksums(t)
		refusedLeft := map[string]bool{}
		for i, id := range ids {
			if i%10 == 3 {
				refusedLeft[id.String()] = true
			}
		}
		bb := dlqtest.NewBroker()
		for _, br := range []*dlqtest.Broker{f.Broker, bb} {
			for id := range refusedLeft {
				br.Refuse[id] = sdk.Permanent(fmt.Errorf("refused %s", id))
			}
			for _, id := range last {
				br.Refuse[id.String()] = sdk.Permanent(fmt.Errorf("refused %s", id))
			}
		}
		b := newPeer(t, f, stB, bb, "daemon-b")
		stall := stallA(t, f)
		pagesOf25(f.Ops, b.ops)
		a := startA(t, f)
		t.Cleanup(stall.let) // first: the runners' Stop waits for A's pages
		op := retryOrders(t, ctx, f.Ops, 0)
		require.EqualValues(t, 90, op.Matched)
		waitFor(t, 30*time.Second, "four pages at the broker", func() bool { return stall.inFlight.Load() == 4 })
		require.NoError(t, b.runner.Start(ctx))
		takeOver(t, f, b, op.ID)
		atThePages(t, b, op.ID, 4)
		stall.let()
		dlqtest.WaitOperation(t, f.Ops, op.ID, dlqtest.Finished, "dlqtest.Finished")
		settled(t, a, b)
		done, err := f.Ops.Operation(ctx, op.ID)
		require.NoError(t, err)
		counts := sends(f.Broker, bb)
		acked := 0
		attempts := map[int]int{} // refused messages with attempts left, by retry_count
		for _, id := range ids {
			m := f.Get(t, id)
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
			require.Equal(t, dlq.StatusDead, f.Get(t, id).Status)
		}
		require.Equal(t, dlq.OperationCompleted, done.State)
		fails, err := f.Ops.OperationFailures(ctx, op.ID, 1000)
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
				m := f.Get(t, r.ID)
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
		f.RequireUntouched(t, before, others)
		require.Equal(t, map[int]int{1: len(refusedLeft)}, attempts, "a refused message is tried once by the operation")
	})
}

// TestARetryAllTakenOver: a retry-all (the request runs the operation
// itself, under [retry] lease) taken over while three pages are at the
// broker; sent once on PostgreSQL, at most twice on SQLite (see
// TestADaemonStalledPastTheLeaseWithAPage), counted once.
func TestARetryAllTakenOver(t *testing.T) {
	each2(t, func(t *testing.T, f *dlqtest.Fixture, stB store.Store) {
		ctx := testsvc.Context(t, 2*time.Minute)
		ids := f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 60)
		others := f.IngestTo(t, "billing.dlq.v1", "billing.events.v1", "boom", 100, 3)
		before := f.Checksums(t)
		bb := dlqtest.NewBroker()
		b := newPeer(t, f, stB, bb, "daemon-b")
		stall := stallA(t, f)
		pagesOf25(f.Ops, b.ops)
		t.Cleanup(stall.let)
		type result struct {
			r   bulk.RetryAllResult
			err error
		}
		out := make(chan result, 1)
		go func() {
			r, err := f.Ops.RetryAll(ctx, "orders.dlq.v1")
			out <- result{r, err}
		}()
		waitFor(t, 30*time.Second, "three pages at the broker", func() bool { return stall.inFlight.Load() == 3 })
		ops, err := f.Ops.Operations(ctx, 10, true)
		require.NoError(t, err)
		require.Len(t, ops, 1)
		require.NoError(t, b.runner.Start(ctx))
		takeOver(t, f, b, ops[0].ID)
		atThePages(t, b, ops[0].ID, 3)
		stall.let()
		r := <-out
		t.Logf("retry-all answered %+v, %v", r.r, r.err)
		done := dlqtest.WaitOperation(t, f.Ops, ops[0].ID, dlqtest.Finished, "dlqtest.Finished")
		counts := sends(f.Broker, bb)
		for _, id := range ids {
			require.Equal(t, dlq.StatusResolved, f.Get(t, id).Status)
			requireSends(t, f, counts[id.String()], "%s", id)
		}
		require.Equal(t, dlq.OperationCompleted, done.State)
		require.Equal(t, map[string]int64{dlq.ItemRetried: 60}, done.Outcomes)
		require.EqualValues(t, 60, done.Done)
		f.RequireUntouched(t, before, others)
	})
}

// TestATakeoverWhileASourceIsDown: messages of a second source whose broker
// is down during the takeover (for A and for B), up again later.
func TestATakeoverWhileASourceIsDown(t *testing.T) {
	each2(t, func(t *testing.T, f *dlqtest.Fixture, stB store.Store) {
		ctx := testsvc.Context(t, 3*time.Minute)
		ids := f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 20)
		var ids2 []uuid.UUID
		{
			batch := make([]dlq.Incoming, 10)
			for i := range batch {
				batch[i] = dlq.Incoming{Position: dlq.LogPosition("kafka2", "orders.dlq.v1", 0, int64(500+i)),
					OriginalTopic: "orders.events.v1", ErrorMessage: "boom", Payload: []byte(fmt.Sprintf(`{"m":%d}`, i))}
			}
			_, err := f.Store.IngestDLQ(ctx, batch, dlq.IngestOptions{Now: f.Clock.Now(), MaxRetries: 3})
			require.NoError(t, err)
			page, err := f.Store.SearchDLQ(ctx, dlq.SearchFilter{Topic: "orders.dlq.v1", Limit: 1000})
			require.NoError(t, err)
			for _, m := range page.Messages {
				if m.Position.Source == "kafka2" {
					ids2 = append(ids2, m.ID)
				}
			}
			require.Len(t, ids2, 10)
		}
		others := f.IngestTo(t, "billing.dlq.v1", "billing.events.v1", "boom", 100, 3)
		before := f.Checksums(t)
		downA, downB, bb := dlqtest.NewBroker(), dlqtest.NewBroker(), dlqtest.NewBroker()
		downA.Down = fmt.Errorf("kafka2 unreachable")
		downB.Down = fmt.Errorf("kafka2 unreachable")
		f.Sources = multi{"kafka": f.Broker, "kafka2": downA}
		f.Reconfigure(t)
		_, opsB := f.Daemon(t, "daemon-b", stB, multi{"kafka": bb, "kafka2": downB})
		runnerB := dlqtest.NewRunner(t, opsB)
		b := &peer{name: "daemon-b", ops: opsB, runner: runnerB, sig: opsB.Signals()}
		stall := stallA(t, f)
		a := startA(t, f)
		t.Cleanup(stall.let)
		op := retryOrders(t, ctx, f.Ops, 0)
		<-stall.started
		require.NoError(t, runnerB.Start(ctx))
		takeOver(t, f, b, op.ID)
		atThePages(t, b, op.ID, 1)
		stall.let()
		// Both find kafka2 down: A sending the page, B trying again what A
		// could not send.
		a.sig.PageTried.WaitFor(t, "A's page came back", func(try bulk.PageTry) bool { return try.Operation == op.ID })
		b.sig.PageTried.WaitFor(t, "B found kafka2 down", func(try bulk.PageTry) bool { return errors.Is(try.Err, derrors.ErrUnavailable) })
		downB.Set(func(b *dlqtest.Broker) { b.Down = nil })
		downA.Set(func(b *dlqtest.Broker) { b.Down = nil })
		done := finishedAsTimeGoesOn(t, ctx, f, op.ID)
		counts := sends(f.Broker, bb, downA, downB)
		for _, id := range append(append([]uuid.UUID{}, ids...), ids2...) {
			require.Equal(t, dlq.StatusResolved, f.Get(t, id).Status)
			require.Equal(t, 1, counts[id.String()])
		}
		require.Equal(t, dlq.OperationCompleted, done.State)
		require.Equal(t, map[string]int64{dlq.ItemRetried: 30}, done.Outcomes)
		require.EqualValues(t, 30, done.Done)
		f.RequireUntouched(t, before, others)
	})
}

// TestAnOperationTakenOverTwice: A -> B -> C: B is pushed out too (the
// clock passes its lease) while A's page is still at the broker.
func TestAnOperationTakenOverTwice(t *testing.T) {
	each2(t, func(t *testing.T, f *dlqtest.Fixture, stB store.Store) {
		ctx := testsvc.Context(t, 2*time.Minute)
		ids := f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 60)
		others := f.IngestTo(t, "billing.dlq.v1", "billing.events.v1", "boom", 100, 3)
		before := f.Checksums(t)
		bb, bc := dlqtest.NewBroker(), dlqtest.NewBroker()
		b := newPeer(t, f, stB, bb, "daemon-b")
		c := newPeer(t, f, stB, bc, "daemon-c")
		stall := stallA(t, f)
		pagesOf25(f.Ops, b.ops, c.ops)
		a := startA(t, f)
		t.Cleanup(stall.let)
		op := retryOrders(t, ctx, f.Ops, 0)
		waitFor(t, 30*time.Second, "three pages at the broker", func() bool { return stall.inFlight.Load() == 3 })
		require.NoError(t, b.runner.Start(ctx))
		takeOver(t, f, b, op.ID)
		atThePages(t, b, op.ID, 3)
		require.NoError(t, c.runner.Start(ctx))
		takeOver(t, f, c, op.ID)
		atThePages(t, c, op.ID, 3)
		stall.let()
		dlqtest.WaitOperation(t, f.Ops, op.ID, dlqtest.Finished, "dlqtest.Finished")
		settled(t, a, b, c)
		done, err := f.Ops.Operation(ctx, op.ID)
		require.NoError(t, err)
		counts := sends(f.Broker, bb, bc)
		for _, id := range ids {
			require.Equal(t, dlq.StatusResolved, f.Get(t, id).Status)
			require.Equal(t, 1, counts[id.String()], "A %d B %d C %d", dlqtest.RepublishCounts(f.Broker)[id.String()],
				dlqtest.RepublishCounts(bb)[id.String()], dlqtest.RepublishCounts(bc)[id.String()])
		}
		require.Equal(t, dlq.OperationCompleted, done.State)
		require.Equal(t, map[string]int64{dlq.ItemRetried: 60}, done.Outcomes)
		require.EqualValues(t, 60, done.Done)
		f.RequireUntouched(t, before, others)
	})
}
