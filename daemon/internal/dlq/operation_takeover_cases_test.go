package dlq_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/migrations"
	"github.com/lifecycled/lifecycled/sdk"
)

// aStall makes every send of daemon A (f.broker) wait, with the broker,
// until release is closed; B sends through its own broker, never held.
// A renews the claims of the messages it is sending each time the test's
// clock moves (the clock moves faster than a third of the lease of real
// time): A is alive and its broker slow, while its operation lease,
// renewed on its own real-time schedule, runs out. (A heartbeat every
// 5 ms instead kept SQLite's write lock so busy, on a loaded machine, that
// daemon B starved.)
type aStall struct {
	inFlight atomic.Int32
	started  chan struct{}
	release  chan struct{}
	once     sync.Once
}

func stallA(f *fixture) *aStall {
	s := &aStall{started: make(chan struct{}, 64), release: make(chan struct{})}
	dlq.SetClaimPace(f.svc, f.clock.ticks, f.clock.renewed)
	f.broker.set(func(b *broker) {
		b.during = func() {
			s.inFlight.Add(1)
			select {
			case s.started <- struct{}{}:
			default:
			}
			<-s.release
		}
	})
	return s
}

func (s *aStall) let() { s.once.Do(func() { close(s.release) }) }

// gated is a store whose RetryDLQPage waits until gate is closed (a daemon
// that reaches the page later: a rate, other pages first).
type gated struct {
	dlq.Store
	gate chan struct{}
}

func (g gated) RetryDLQPage(ctx context.Context, p dlq.RetryPage) ([]dlq.Recorded, error) {
	<-g.gate
	return g.Store.RetryDLQPage(ctx, p)
}

// daemon is a second daemon on f's store (or st) with its own broker.
func daemon(t *testing.T, f *fixture, st dlq.Store, b *broker, name string) (*dlq.Service, *dlq.OperationRunner) {
	if st == nil {
		st = f.store
	}
	svc := dlq.NewService(st, sources{b}, func() dlq.Policy { return f.policy }, name,
		daemonLog(t, name), dlq.NewMetrics(nil, f.store, nil, periodic.New(nil)))
	dlq.SetClock(svc, nil, f.clock.now)
	r := dlq.NewOperationRunner(svc, func() dlq.OperationConfig {
		return dlq.OperationConfig{PollInterval: 20 * time.Millisecond, Lease: 2 * time.Second, MaxRunning: 2}
	})
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	return svc, r
}

// finishedAsTimeGoesOn waits up to a minute for op to finish while the
// test's clock moves 3 s a step, as time would go on in a daemon (claims
// and leases run out), and returns it.
func (f *fixture) finishedAsTimeGoesOn(t *testing.T, ctx context.Context, op uuid.UUID) *dlq.Operation {
	t.Helper()
	var done *dlq.Operation
	testsvc.Eventually(t, time.Minute, func() bool {
		f.clock.set(f.clock.now().Add(3 * time.Second))
		var err error
		done, err = f.svc.Operation(ctx, op)
		require.NoError(t, err)
		return done.Finished()
	}, "finished")
	return done
}

// takeOver moves the clock until owner holds op.
func takeOver(t *testing.T, ctx context.Context, f *fixture, svc *dlq.Service, op uuid.UUID, owner string) {
	t.Helper()
	for step := 0; step < 200; step++ {
		f.clock.set(f.clock.now().Add(5 * time.Second))
		time.Sleep(50 * time.Millisecond)
		o, err := svc.Operation(ctx, op)
		require.NoError(t, err)
		if o.LeaseOwner == owner {
			return
		}
	}
	t.Fatalf("%s never took the operation over", owner)
}

// pagesOf25 gives the daemons pages of 25 messages: several pages at the
// broker with few messages (pages of 250 took SQLite under the race
// detector half a minute).
func pagesOf25(svcs ...*dlq.Service) {
	for _, s := range svcs {
		dlq.SetBulkPageCap(s, 25)
	}
}

func sends(bs ...*broker) map[string]int {
	out := map[string]int{}
	for _, b := range bs {
		for k, v := range republishCounts(b) {
			out[k] += v
		}
	}
	return out
}

// retryOrders starts a bulk retry of topic orders.dlq.v1 on svc, at rate
// messages/s (0: unthrottled).
func retryOrders(t *testing.T, ctx context.Context, svc *dlq.Service, rate float64) *dlq.Operation {
	t.Helper()
	op, err := svc.StartOperation(ctx, dlq.OperationRequest{Action: dlq.ActionRetry, Rate: rate,
		Filter: dlq.OperationFilter{Search: dlq.SearchFilter{Topic: "orders.dlq.v1"}}})
	require.NoError(t, err)
	return op
}

// requireSends checks how many times a message reached the broker when a
// daemon stalled past the lease with it: once on PostgreSQL, where the
// claim is a row lock held to the outcome; once or twice on SQLite, where
// it is a lease.
func requireSends(t *testing.T, f *fixture, n int, msg string, args ...any) {
	t.Helper()
	if _, rowLocks := f.store.(*store.Postgres); rowLocks {
		require.Equal(t, 1, n, "sent once: "+fmt.Sprintf(msg, args...))
		return
	}
	require.Contains(t, []int{1, 2}, n, "sent once, or twice after a stall past the lease: "+fmt.Sprintf(msg, args...))
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testsvc.Eventually(t, d, cond, what)
}

// each2 is each with a second store on the same database for daemon B:
// on PostgreSQL each daemon has its own connection pool, as in production.
// A SQLite file serves one daemon (docs/operations.md), so there B shares
// A's pool: SQLite's write lock has no queue, and a second process on the
// file starves in its busy handler while the first, with writes queued on
// its own connection, takes the lock again at once.
func each2(t *testing.T, fn func(t *testing.T, f *fixture, stB store.Store)) {
	for _, d := range storetest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			dsn := storetest.DSN(t, d)
			st := storetest.OpenDSN(t, d, dsn)
			stB := st
			if d != migrations.SQLite {
				stB = storetest.OpenDSN(t, d, dsn)
			}
			f := &fixture{store: st, broker: newBroker(), clock: &clock{t: t0},
				policy: dlq.Policy{MaxRetries: 3, Backoff: backoffPolicy, Lease: 30 * time.Second}}
			f.svc = dlq.NewService(st, sources{f.broker}, func() dlq.Policy { return f.policy }, "daemon-a", daemonLog(t, "daemon-a"),
				dlq.NewMetrics(nil, st, nil, periodic.New(nil)))
			dlq.SetClock(f.svc, nil, f.clock.now)
			fn(t, f, stB)
		})
	}
}

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
		daemonB, runnerB := daemon(t, f, nil, bb, "daemon-b")
		stall := stallA(f)
		startRunner(t, f.svc)
		t.Cleanup(stall.let)
		op := retryOrders(t, ctx, f.svc, 0)
		<-stall.started // A is stalled with the page; its operation lease runs out
		require.NoError(t, runnerB.Start(ctx))
		takeOver(t, ctx, f, daemonB, op.ID, "daemon-b")
		stall.let()

		done := waitOperation(t, f.svc, op.ID, finished, "completed")
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
		daemonB, runnerB := daemon(t, f, nil, bb, "daemon-b")
		stall := stallA(f)
		startRunner(t, f.svc)
		t.Cleanup(stall.let) // first: the runners' Stop waits for A's pages
		op := retryOrders(t, ctx, f.svc, 0)
		<-stall.started
		require.NoError(t, runnerB.Start(ctx))
		// A stays stalled while the clock passes the lease (B takes the
		// operation over), until B sent the page or 10 s went by.
		tookOver := false
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && len(republishCounts(bb)) < len(ids); {
			f.clock.set(f.clock.now().Add(5 * time.Second))
			time.Sleep(50 * time.Millisecond)
			if o, err := daemonB.Operation(ctx, op.ID); err == nil && o.LeaseOwner == "daemon-b" {
				tookOver = true
			}
		}
		// B sends only what it runs: sends by B are the takeover too.
		require.True(t, tookOver || len(republishCounts(bb)) > 0, "daemon-b took the operation over")
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

// TestACancelWhileTheBrokerHasAPageCountsItsAcks: a daemon stalled past
// the operation's lease with its page at the broker; the operation is
// cancelled (no live lease: cancelled at once). The broker acknowledges the
// page: its messages are RESOLVED by the operation, which counts them.
// They were RESOLVED and not counted.
func TestACancelWhileTheBrokerHasAPageCountsItsAcks(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, 2*time.Minute)
		ids := f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 5)
		stall := stallA(f)
		startRunner(t, f.svc)
		t.Cleanup(stall.let) // first: the runners' Stop waits for A's pages
		op := retryOrders(t, ctx, f.svc, 0)
		<-stall.started
		other, _ := daemon(t, f, nil, newBroker(), "daemon-b")
		for {
			// past the 2 s operation lease (A's heartbeat may renew it in
			// between: a cancel is then only requested), not the 30 s claim
			f.clock.set(f.clock.now().Add(5 * time.Second))
			c, err := other.CancelOperation(ctx, op.ID, nil)
			require.NoError(t, err)
			t.Logf("after cancel: state=%s", c.State)
			if c.State == dlq.OperationCancelled {
				break
			}
		}
		stall.let()
		waitFor(t, 30*time.Second, "A's page recorded", func() bool { return f.get(t, ids[4]).Status == dlq.StatusResolved })
		time.Sleep(200 * time.Millisecond)
		done := waitOperation(t, f.svc, op.ID, finished, "finished")
		counts := republishCounts(f.broker)
		for _, id := range ids {
			require.Equal(t, dlq.StatusResolved, f.get(t, id).Status)
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
	each(t, false, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, 2*time.Minute)
		ids := f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 5)
		bb := newBroker()
		daemonB, runnerB := daemon(t, f, nil, bb, "daemon-b")
		stall := stallA(f)
		startRunner(t, f.svc)
		t.Cleanup(stall.let) // first: the runners' Stop waits for A's pages
		op := retryOrders(t, ctx, f.svc, 0)
		<-stall.started
		require.NoError(t, runnerB.Start(ctx))
		takeOver(t, ctx, f, daemonB, op.ID, "daemon-b")
		time.Sleep(300 * time.Millisecond) // B is at the page
		_, err := daemonB.CancelOperation(ctx, op.ID, nil)
		require.NoError(t, err)
		time.Sleep(500 * time.Millisecond)
		stall.let()
		waitFor(t, 30*time.Second, "A's page recorded", func() bool { return f.get(t, ids[4]).Status == dlq.StatusResolved })
		done := waitOperation(t, f.svc, op.ID, finished, "finished")
		time.Sleep(200 * time.Millisecond)
		done, err = f.svc.Operation(ctx, op.ID)
		require.NoError(t, err)
		counts := sends(f.broker, bb)
		for _, id := range ids {
			require.Equal(t, dlq.StatusResolved, f.get(t, id).Status)
			require.Equal(t, 1, counts[id.String()])
		}
		// COMPLETED is right too when the set was read to its end before the cancel.
		require.Contains(t, []dlq.OperationState{dlq.OperationCancelled, dlq.OperationCompleted}, done.State)
		require.Equal(t, map[string]int64{dlq.ItemRetried: 5}, done.Outcomes, "the 5 messages the operation resolved are counted (state %s)", done.State)
	})
}

// TestATakeoverDoesNotResendAMessageThatCameBack: A's page resolved a
// message (recorded without the progress); the replay failed again and came
// back (PENDING, one attempt counted) before B reached the page. The
// operation sent it once: B counts it and does not send it again.
func TestATakeoverDoesNotResendAMessageThatCameBack(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, 2*time.Minute)
		ids := f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 5)
		bb := newBroker()
		g := gated{Store: f.store, gate: make(chan struct{})}
		daemonB, runnerB := daemon(t, f, g, bb, "daemon-b")
		stall := stallA(f)
		startRunner(t, f.svc)
		t.Cleanup(stall.let) // first: the runners' Stop waits for A's pages
		op := retryOrders(t, ctx, f.svc, 0)
		<-stall.started
		require.NoError(t, runnerB.Start(ctx))
		takeOver(t, ctx, f, daemonB, op.ID, "daemon-b")
		stall.let()
		waitFor(t, 30*time.Second, "A's page recorded", func() bool { return f.get(t, ids[0]).Status == dlq.StatusResolved })
		id := ids[0]
		in := dlq.Incoming{Position: dlq.Position{Source: "kafka", Topic: "orders.dlq.v1", Offset: 50}, OriginalTopic: "orders.events.v1",
			ErrorMessage: "failed again", Payload: []byte(`{"n":0}`), FeedbackOf: &id}
		res, err := f.store.IngestDLQ(ctx, []dlq.Incoming{in}, dlq.IngestOptions{Now: f.clock.now(), MaxRetries: 3})
		require.NoError(t, err)
		require.Equal(t, 1, res.Feedback)
		require.Equal(t, dlq.StatusPending, f.get(t, id).Status)
		close(g.gate)
		done := waitOperation(t, f.svc, op.ID, finished, "finished")
		counts := sends(f.broker, bb)
		t.Logf("outcomes %v done %d; sends of the returned message: A %d, B %d", done.Outcomes, done.Done,
			republishCounts(f.broker)[id.String()], republishCounts(bb)[id.String()])
		require.Equal(t, dlq.OperationCompleted, done.State)
		require.Equal(t, 1, counts[id.String()], "the operation sent the message once")
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
		for _, b := range []*broker{f.broker, bb} {
			for id := range refusedLeft {
				b.refuse[id] = sdk.Permanent(fmt.Errorf("refused %s", id))
			}
			for _, id := range last {
				b.refuse[id.String()] = sdk.Permanent(fmt.Errorf("refused %s", id))
			}
		}
		daemonB, runnerB := daemon(t, f, stB, bb, "daemon-b")
		pagesOf25(f.svc, daemonB)
		stall := stallA(f)
		startRunner(t, f.svc)
		t.Cleanup(stall.let) // first: the runners' Stop waits for A's pages
		op := retryOrders(t, ctx, f.svc, 0)
		require.EqualValues(t, 90, op.Matched)
		waitFor(t, 30*time.Second, "four pages at the broker", func() bool { return stall.inFlight.Load() == 4 })
		require.NoError(t, runnerB.Start(ctx))
		takeOver(t, ctx, f, daemonB, op.ID, "daemon-b")
		time.Sleep(300 * time.Millisecond)
		stall.let()
		done := waitOperation(t, f.svc, op.ID, finished, "finished")
		time.Sleep(300 * time.Millisecond)
		done, err := f.svc.Operation(ctx, op.ID)
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
		fails, err := f.svc.OperationFailures(ctx, op.ID, 1000)
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
		daemonB, runnerB := daemon(t, f, stB, bb, "daemon-b")
		pagesOf25(f.svc, daemonB)
		stall := stallA(f)
		t.Cleanup(stall.let)
		type result struct {
			r   dlq.RetryAllResult
			err error
		}
		out := make(chan result, 1)
		go func() {
			r, err := f.svc.RetryAll(ctx, "orders.dlq.v1")
			out <- result{r, err}
		}()
		waitFor(t, 30*time.Second, "three pages at the broker", func() bool { return stall.inFlight.Load() == 3 })
		ops, err := f.svc.Operations(ctx, 10, true)
		require.NoError(t, err)
		require.Len(t, ops, 1)
		require.NoError(t, runnerB.Start(ctx))
		takeOver(t, ctx, f, daemonB, ops[0].ID, "daemon-b")
		time.Sleep(300 * time.Millisecond)
		stall.let()
		r := <-out
		t.Logf("retry-all answered %+v, %v", r.r, r.err)
		done := waitOperation(t, f.svc, ops[0].ID, finished, "finished")
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

// multi is a plugin host with several sources, each a broker.
type multi map[string]*broker

func (m multi) SourceNames() []string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	return out
}
func (m multi) Source(name string) (sdk.DLQSource, error) {
	if b, ok := m[name]; ok {
		return b, nil
	}
	return nil, fmt.Errorf("no source %s", name)
}
func (m multi) Running(name string) bool {
	b, ok := m[name]
	if !ok {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.running
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
		dlq.SetClock(f.svc, nil, f.clock.now)
		daemonB := dlq.NewService(stB, multi{"kafka": bb, "kafka2": downB}, func() dlq.Policy { return f.policy }, "daemon-b",
			daemonLog(t, "daemon-b"), dlq.NewMetrics(nil, stB, nil, periodic.New(nil)))
		dlq.SetClock(daemonB, nil, f.clock.now)
		runnerB := dlq.NewOperationRunner(daemonB, func() dlq.OperationConfig {
			return dlq.OperationConfig{PollInterval: 20 * time.Millisecond, Lease: 2 * time.Second, MaxRunning: 2}
		})
		t.Cleanup(func() { _ = runnerB.Stop(context.Background()) })
		stall := stallA(f)
		startRunner(t, f.svc)
		t.Cleanup(stall.let)
		op := retryOrders(t, ctx, f.svc, 0)
		<-stall.started
		require.NoError(t, runnerB.Start(ctx))
		takeOver(t, ctx, f, daemonB, op.ID, "daemon-b")
		time.Sleep(300 * time.Millisecond)
		stall.let()
		time.Sleep(time.Second)
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
		daemonB, runnerB := daemon(t, f, stB, bb, "daemon-b")
		daemonC, runnerC := daemon(t, f, stB, bc, "daemon-c")
		pagesOf25(f.svc, daemonB, daemonC)
		stall := stallA(f)
		startRunner(t, f.svc)
		t.Cleanup(stall.let)
		op := retryOrders(t, ctx, f.svc, 0)
		waitFor(t, 30*time.Second, "three pages at the broker", func() bool { return stall.inFlight.Load() == 3 })
		require.NoError(t, runnerB.Start(ctx))
		takeOver(t, ctx, f, daemonB, op.ID, "daemon-b")
		time.Sleep(300 * time.Millisecond)
		require.NoError(t, runnerC.Start(ctx))
		takeOver(t, ctx, f, daemonC, op.ID, "daemon-c")
		time.Sleep(300 * time.Millisecond)
		stall.let()
		done := waitOperation(t, f.svc, op.ID, finished, "finished")
		time.Sleep(300 * time.Millisecond)
		done, err := f.svc.Operation(ctx, op.ID)
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

// answeredBy is how many of m's attempts are answers of the broker to
// operation op.
func answeredBy(m *dlq.Message, op uuid.UUID) int {
	n := 0
	for _, a := range m.Attempts {
		if a.Operation != nil && *a.Operation == op {
			switch a.Outcome {
			case dlq.OutcomeResolved, dlq.OutcomeFailed, dlq.OutcomeDead:
				n++
			}
		}
	}
	return n
}

// TestATakeoverRemembersPastTheHistoryCap: A's page is refused for two
// messages (attempts left) and acknowledged for the others, recorded
// without the progress (B took the operation over); then each refused
// message gets 50 more attempts (single retries) before B reaches the
// page, which pushes A's attempt out of their history (the newest 50 are
// kept). B does not send them again, and counts them as refused. When the
// history was what said the operation had sent a message, B sent it again
// and counted one as retried and the other as skipped.
func TestATakeoverRemembersPastTheHistoryCap(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, 2*time.Minute)
		f.policy.MaxRetries = 100
		ids := f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 4)
		f.policy.MaxRetries = 51
		m2 := f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 10, 1)[0]
		f.policy.MaxRetries = 3
		others := f.ingestTo(t, "billing.dlq.v1", "billing.events.v1", "boom", 100, 3)
		before := f.checksums(t)
		m1 := ids[3]
		refuse := sdk.Permanent(fmt.Errorf("consumer rejects it"))
		f.broker.set(func(b *broker) { b.refuse[m1.String()] = refuse; b.refuse[m2.String()] = refuse })
		bb := newBroker()
		g := gated{Store: f.store, gate: make(chan struct{})}
		daemonB, runnerB := daemon(t, f, g, bb, "daemon-b")
		stall := stallA(f)
		startRunner(t, f.svc)
		t.Cleanup(stall.let)
		op := retryOrders(t, ctx, f.svc, 0)
		require.EqualValues(t, 5, op.Matched)
		<-stall.started
		require.NoError(t, runnerB.Start(ctx))
		takeOver(t, ctx, f, daemonB, op.ID, "daemon-b")
		stall.let()
		waitFor(t, 30*time.Second, "A's page recorded", func() bool {
			return f.get(t, m1).RetryCount == 1 && f.get(t, m2).RetryCount == 1 && f.get(t, ids[0]).Status == dlq.StatusResolved
		})
		require.Equal(t, 1, answeredBy(f.get(t, m1), op.ID))
		f.broker.set(func(b *broker) { b.during = nil })
		for i := 0; i < 50; i++ {
			for _, id := range []uuid.UUID{m1, m2} {
				_, err := f.svc.Retry(ctx, id)
				require.ErrorIs(t, err, dlq.ErrRepublishFailed)
			}
		}
		require.Equal(t, dlq.StatusPending, f.get(t, m1).Status)
		require.Equal(t, dlq.StatusDead, f.get(t, m2).Status)
		require.Zero(t, answeredBy(f.get(t, m1), op.ID), "the history no longer holds the operation's attempt")
		close(g.gate)
		done := waitOperation(t, f.svc, op.ID, finished, "finished")
		require.Equal(t, dlq.OperationCompleted, done.State)
		require.Zero(t, republishCounts(bb)[m1.String()], "the operation gave m1 one answered attempt (A's refusal)")
		require.Equal(t, map[string]int64{dlq.ItemRetried: 3, dlq.ItemRefused: 2}, done.Outcomes)
		require.EqualValues(t, 5, done.Done)
		require.Equal(t, 51, f.get(t, m1).RetryCount, "one attempt of the operation and 50 single retries")
		f.requireUntouched(t, before, others)
	})
}

// signalled signals after each RetryDLQPage of daemon B returns.
type signalled struct {
	dlq.Store
	ret chan struct{}
}

// nextTry waits for B's next try of a page to return, after the one under
// way (if any).
func (s signalled) nextTry(t *testing.T) {
	t.Helper()
	select {
	case <-s.ret:
	default:
	}
	select {
	case <-s.ret:
	case <-time.After(5 * time.Second):
		t.Fatal("B never tried the page")
	}
}

func (s signalled) RetryDLQPage(ctx context.Context, p dlq.RetryPage) ([]dlq.Recorded, error) {
	r, err := s.Store.RetryDLQPage(ctx, p)
	select {
	case s.ret <- struct{}{}:
	default:
	}
	return r, err
}

// TestACancelAfterTheAnswersBeforeTheNewOwnerCountsThem: A's page is
// answered after A lost the operation to B (the answers kept in the
// items), then the operation is cancelled while B waits to try those items
// again (they were under A's claim at B's last try). A's acknowledged
// messages are counted, as when the cancel comes before A's record. They
// were RESOLVED and not counted (SQLite).
func TestACancelAfterTheAnswersBeforeTheNewOwnerCountsThem(t *testing.T) {
	each2(t, func(t *testing.T, f *fixture, stB store.Store) {
		ctx := testsvc.Context(t, 2*time.Minute)
		ids := f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 5)
		bb := newBroker()
		sig := signalled{Store: stB, ret: make(chan struct{}, 1)}
		daemonB, runnerB := daemon(t, f, sig, bb, "daemon-b")
		stall := stallA(f)
		startRunner(t, f.svc)
		t.Cleanup(stall.let)
		op := retryOrders(t, ctx, f.svc, 0)
		<-stall.started
		require.NoError(t, runnerB.Start(ctx))
		takeOver(t, ctx, f, daemonB, op.ID, "daemon-b")
		_, pg := f.store.(*store.Postgres)
		if !pg {
			sig.nextTry(t) // the items under A's claim

		}
		stall.let()
		waitFor(t, 30*time.Second, "A's page recorded", func() bool { return f.get(t, ids[4]).Status == dlq.StatusResolved })
		c, err := daemonB.CancelOperation(ctx, op.ID, nil)
		if pg && err != nil {
			t.Logf("cancel on postgres: %v (B counted A's page from its answers first)", err)
		} else {
			require.NoError(t, err)
			t.Logf("cancel: state=%s", c.State)
		}
		done := waitOperation(t, f.svc, op.ID, finished, "finished")
		time.Sleep(300 * time.Millisecond)
		done, err = f.svc.Operation(ctx, op.ID)
		require.NoError(t, err)
		counts := sends(f.broker, bb)
		for _, id := range ids {
			require.Equal(t, dlq.StatusResolved, f.get(t, id).Status)
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
	each2(t, func(t *testing.T, f *fixture, stB store.Store) {
		ctx := testsvc.Context(t, 2*time.Minute)
		ids := f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 5)
		_, err := f.svc.Retry(ctx, ids[0])
		require.NoError(t, err)
		require.Equal(t, dlq.StatusResolved, f.get(t, ids[0]).Status)
		bb := newBroker()
		sig := signalled{Store: stB, ret: make(chan struct{}, 1)}
		daemonB, runnerB := daemon(t, f, sig, bb, "daemon-b")
		stall := stallA(f)
		startRunner(t, f.svc)
		t.Cleanup(stall.let)
		op := retryOrders(t, ctx, f.svc, 0)
		t.Logf("matched %d", op.Matched)
		<-stall.started
		require.NoError(t, runnerB.Start(ctx))
		takeOver(t, ctx, f, daemonB, op.ID, "daemon-b")
		_, pg := f.store.(*store.Postgres)
		if !pg {
			sig.nextTry(t)
		} else {
			time.Sleep(300 * time.Millisecond)
		}
		c, err := daemonB.CancelOperation(ctx, op.ID, nil)
		require.NoError(t, err)
		t.Logf("cancel: state=%s", c.State)
		if !pg {
			waitOperation(t, f.svc, op.ID, finished, "finished before A's record")
		} else {
			time.Sleep(500 * time.Millisecond)
		}
		stall.let()
		waitFor(t, 30*time.Second, "A's page recorded", func() bool { return f.get(t, ids[4]).Status == dlq.StatusResolved })
		done := waitOperation(t, f.svc, op.ID, finished, "finished")
		time.Sleep(300 * time.Millisecond)
		done, err = f.svc.Operation(ctx, op.ID)
		require.NoError(t, err)
		t.Logf("state %s outcomes %v done %d succeeded %d", done.State, done.Outcomes, done.Done, done.Succeeded)
		counts := sends(f.broker, bb)
		for _, id := range ids[1:] {
			require.Equal(t, dlq.StatusResolved, f.get(t, id).Status)
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
	each2(t, func(t *testing.T, f *fixture, stB store.Store) {
		ctx := testsvc.Context(t, 2*time.Minute)
		ids := f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 5)
		bb := newBroker()
		daemonB, runnerB := daemon(t, f, stB, bb, "daemon-b")
		stall := stallA(f)
		startRunner(t, f.svc)
		t.Cleanup(stall.let)
		op := retryOrders(t, ctx, f.svc, 1)
		waitFor(t, 30*time.Second, "three pages at the broker", func() bool { return stall.inFlight.Load() >= 3 })
		require.NoError(t, runnerB.Start(ctx))
		takeOver(t, ctx, f, daemonB, op.ID, "daemon-b")
		n := int(stall.inFlight.Load())
		stall.let()
		waitFor(t, 30*time.Second, "A's pages recorded", func() bool { return f.get(t, ids[n-1]).Status == dlq.StatusResolved })
		_, cerr := daemonB.CancelOperation(ctx, op.ID, nil)
		t.Logf("A had %d pages at the broker; cancel: %v", n, cerr)
		done := waitOperation(t, f.svc, op.ID, finished, "finished")
		time.Sleep(300 * time.Millisecond)
		done, err := f.svc.Operation(ctx, op.ID)
		require.NoError(t, err)
		counts := sends(f.broker, bb)
		resolved := 0
		for _, id := range ids {
			require.LessOrEqual(t, counts[id.String()], 1)
			if f.get(t, id).Status == dlq.StatusResolved {
				resolved++
			}
		}
		t.Logf("state %s outcomes %v done %d; resolved %d", done.State, done.Outcomes, done.Done, resolved)
		require.EqualValues(t, resolved, done.Outcomes[dlq.ItemRetried], "every message the operation resolved is counted")
	})
}

// TestARunThatLostItsLeaseHandsBackWhatItsRunnerTookBack: daemon A's run
// loses its lease to B while A's page is at the broker; B hands the
// operation back (B stopped) and A's runner takes it again before A's run
// has ended. That run ends on the lost lease with pages left, and A's runner starts no
// second run beside it: the operation stayed RUNNING under A's lease with
// no run, until that lease ran out. The clock stands still here, so only
// a hand-back ends it.
func TestARunThatLostItsLeaseHandsBackWhatItsRunnerTookBack(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, 2*time.Minute)
		// Pages of 5: more pages than the run has under way, so it has
		// pages left to read when it stops.
		ids := f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 40)
		dlq.SetBulkPageCap(f.svc, 5)
		others := f.ingestTo(t, "billing.dlq.v1", "billing.events.v1", "boom", 100, 3)
		before := f.checksums(t)
		stall := stallA(f)
		startRunner(t, f.svc)
		t.Cleanup(stall.let)
		op := retryOrders(t, ctx, f.svc, 0)
		<-stall.started
		// B takes the operation (its lease ran out by the clock) ...
		waitFor(t, 30*time.Second, "daemon-b took the operation", func() bool {
			f.clock.set(f.clock.now().Add(5 * time.Second))
			now := f.clock.now()
			o, err := f.store.ClaimDLQOperation(ctx, "daemon-b", now, now.Add(2*time.Second))
			require.NoError(t, err)
			return o != nil
		})
		waitFor(t, 30*time.Second, "A's run saw the lease lost", func() bool {
			return strings.Contains(logged(t, "daemon-a"), "bulk operation lease lost; its run stops")
		})
		// ... and hands it back; A's runner takes it again.
		require.NoError(t, f.store.ReleaseDLQOperation(ctx, op.ID, "daemon-b"))
		waitFor(t, 30*time.Second, "A's runner took it back", func() bool {
			o, err := f.svc.Operation(ctx, op.ID)
			require.NoError(t, err)
			return o.LeaseOwner == "daemon-a"
		})
		stall.let()
		done := waitOperation(t, f.svc, op.ID, finished, "finished without the clock")
		require.Equal(t, dlq.OperationCompleted, done.State)
		require.EqualValues(t, 40, done.Done)
		require.Equal(t, map[string]int64{dlq.ItemRetried: 40}, done.Outcomes)
		counts := republishCounts(f.broker)
		for _, id := range ids {
			require.Equal(t, dlq.StatusResolved, f.get(t, id).Status)
			require.Equal(t, 1, counts[id.String()], "sent once")
		}
		f.requireUntouched(t, before, others)
	})
}
