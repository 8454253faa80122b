package bulk_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/bulk"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/dlqtest"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/migrations"
	"github.com/lifecycled/lifecycled/sdk"
)

// aStall makes every send of daemon A (f.Broker) wait, with the broker,
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

func stallA(t *testing.T, f *dlqtest.Fixture) *aStall {
	s := &aStall{started: make(chan struct{}, 64), release: make(chan struct{})}
	f.Reconfigure(t, dlq.WithClaimPace(f.Clock.Ticks, f.Clock.Renewed))
	f.Broker.Set(func(b *dlqtest.Broker) {
		b.During = func() {
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

// gated is a store whose RetryDLQPage waits until open (a daemon that
// reaches the page later: a rate, other pages first).
type gated struct {
	dlq.Store
	gate chan struct{}
	once sync.Once
}

func newGated(st dlq.Store) *gated { return &gated{Store: st, gate: make(chan struct{})} }

func (g *gated) open() { g.once.Do(func() { close(g.gate) }) }

func (g *gated) RetryDLQPage(ctx context.Context, p dlq.RetryPage) ([]dlq.Recorded, error) {
	<-g.gate
	return g.Store.RetryDLQPage(ctx, p)
}

// daemon is a second daemon on f's store (or st) with its own broker.
func daemon(t *testing.T, f *dlqtest.Fixture, st dlq.Store, b *dlqtest.Broker, name string) (*bulk.Service, *bulk.Runner) {
	if st == nil {
		st = f.Store
	}
	_, ops := f.Daemon(t, name, st, dlqtest.Sources{B: b})
	return ops, dlqtest.NewRunner(t, ops)
}

// finishedAsTimeGoesOn waits up to a minute for op to finish while the
// test's clock moves 3 s a step, as time would go on in a daemon (claims
// and leases run out), and returns it.
func finishedAsTimeGoesOn(t *testing.T, ctx context.Context, f *dlqtest.Fixture, op uuid.UUID) *dlq.Operation {
	t.Helper()
	var done *dlq.Operation
	testsvc.Eventually(t, time.Minute, func() bool {
		f.Clock.Set(f.Clock.Now().Add(3 * time.Second))
		var err error
		done, err = f.Ops.Operation(ctx, op)
		require.NoError(t, err)
		return done.Finished()
	}, "dlqtest.Finished")
	return done
}

// peer is a daemon of a takeover test, with the signals of its runs.
type peer struct {
	name   string
	ops    *bulk.Service
	runner *bulk.Runner
	sig    *bulk.Signals
}

// newPeer is daemon with its signals on; its runner is not started.
func newPeer(t *testing.T, f *dlqtest.Fixture, st dlq.Store, b *dlqtest.Broker, name string) *peer {
	ops, r := daemon(t, f, st, b, name)
	return &peer{name: name, ops: ops, runner: r, sig: ops.Signals()}
}

// startA turns daemon A's signals on and starts its runner.
func startA(t *testing.T, f *dlqtest.Fixture) *peer {
	sig := f.Ops.Signals()
	return &peer{name: "daemon-a", ops: f.Ops, runner: dlqtest.StartRunner(t, f.Ops), sig: sig}
}

// takeOver moves the clock past the operation's lease, a step at a time,
// until p's runner claims op. Each step waits for p's first claim at the
// moved clock; it finds op held still when the old owner's heartbeat
// renewed the lease in between, and the next step moves on.
func takeOver(t *testing.T, f *dlqtest.Fixture, p *peer, op uuid.UUID) {
	t.Helper()
	for step := 0; step < 200; step++ {
		at := f.Clock.Now().Add(5 * time.Second)
		f.Clock.Set(at)
		poll := p.sig.Polled.WaitFor(t, p.name+" polled at the moved clock", func(got bulk.Poll) bool { return !got.Now.Before(at) })
		if poll.Err != nil {
			t.Logf("%s could not claim: %v", p.name, poll.Err)
		}
		if poll.Claimed == op {
			return
		}
	}
	t.Fatalf("%s never took the operation over", p.name)
}

// atThePages waits until p has taken n pages of op to the store: on
// PostgreSQL a page then waits there for the old owner's row locks; on
// SQLite it finds the old owner's claims and is tried again later.
func atThePages(t *testing.T, p *peer, op uuid.UUID, n int) {
	t.Helper()
	for range n {
		p.sig.PageStarted.WaitFor(t, fmt.Sprintf("%s at %d pages", p.name, n), func(try bulk.PageTry) bool {
			return try.Operation == op && try.Try == 1
		})
	}
}

// settled waits until none of the daemons runs an operation any more.
// Once an operation has ended nothing claims it again, so its counts are
// final: the pages its runs had under way have been recorded.
func settled(t *testing.T, peers ...*peer) {
	t.Helper()
	for _, p := range peers {
		for p.runner.Running() > 0 {
			p.sig.RunEnded.Wait(t, p.name+"'s runs ended")
		}
	}
}

// pagesOf25 gives the daemons pages of 25 messages: several pages at the
// broker with few messages (pages of 250 took SQLite under the race
// detector half a minute).
func pagesOf25(daemons ...*bulk.Service) {
	for _, d := range daemons {
		d.CapPages(25)
	}
}

func sends(bs ...*dlqtest.Broker) map[string]int {
	out := map[string]int{}
	for _, b := range bs {
		for k, v := range dlqtest.RepublishCounts(b) {
			out[k] += v
		}
	}
	return out
}

// retryOrders starts a bulk retry of topic orders.dlq.v1 on ops, at rate
// messages/s (0: unthrottled).
func retryOrders(t *testing.T, ctx context.Context, ops *bulk.Service, rate float64) *dlq.Operation {
	t.Helper()
	op, err := ops.StartOperation(ctx, bulk.Request{Action: dlq.ActionRetry, Rate: rate,
		Filter: dlq.OperationFilter{Search: dlq.SearchFilter{Topic: "orders.dlq.v1"}}})
	require.NoError(t, err)
	return op
}

// requireSends checks how many times a message reached the broker when a
// daemon stalled past the lease with it: once on PostgreSQL, where the
// claim is a row lock held to the outcome; once or twice on SQLite, where
// it is a lease.
func requireSends(t *testing.T, f *dlqtest.Fixture, n int, msg string, args ...any) {
	t.Helper()
	if _, rowLocks := f.Store.(*store.Postgres); rowLocks {
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
func each2(t *testing.T, fn func(t *testing.T, f *dlqtest.Fixture, stB store.Store)) {
	for _, d := range storetest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			dsn := storetest.DSN(t, d)
			st := storetest.OpenDSN(t, d, dsn)
			stB := st
			if d != migrations.SQLite {
				stB = storetest.OpenDSN(t, d, dsn)
			}
			fn(t, dlqtest.New(t, st, dlq.Policy{MaxRetries: 3, Backoff: dlqtest.BackoffPolicy, Lease: 30 * time.Second}), stB)
		})
	}
}

// multi is a plugin host with several sources, each a broker.
type multi map[string]*dlqtest.Broker

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
	return b.IsRunning()
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

func (multi) Traits(string) sdk.SourceTraits { return sdk.Protocol2Traits }
