package dlq_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/bulk"
	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
	"github.com/lifecycled/lifecycled/daemon/internal/retry"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

// broker stands in for a DLQ source plugin: the boundary the manager talks
// to over gRPC. It holds dead letters to hand out, records commits and
// republishes, and can refuse messages or be unreachable.
type broker struct {
	mu          sync.Mutex
	queue       []sdk.DeadLetter
	committed   []sdk.Position
	republished []sdk.RepublishMessage
	refuse      map[string]error // per-message error by dlq id
	refuseAny   error            // refuses every message with this error
	down        error            // the whole Republish/Fetch call fails
	running     bool
	// stored reports whether a position is in the state store; a commit of
	// a position that is not is recorded in early.
	stored func(sdk.Position) bool
	early  []sdk.Position
	// during runs while a Republish is in flight, before the broker answers.
	during func()
}

func newBroker() *broker { return &broker{refuse: map[string]error{}, running: true} }

func (b *broker) Configure(context.Context, *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	return &sdk.ConfigureResponse{}, nil
}

func (b *broker) Fetch(ctx context.Context, req *sdk.FetchRequest) (*sdk.FetchResponse, error) {
	b.mu.Lock()
	if down := b.down; down != nil {
		b.mu.Unlock()
		return nil, down
	}
	n := min(req.Max, len(b.queue))
	out := append([]sdk.DeadLetter(nil), b.queue[:n]...)
	b.queue = b.queue[n:]
	b.mu.Unlock()
	if n == 0 {
		select {
		case <-time.After(min(req.Wait, 20*time.Millisecond)):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &sdk.FetchResponse{Messages: out}, nil
}

func (b *broker) Commit(_ context.Context, req *sdk.CommitRequest) (*sdk.CommitResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range req.Positions {
		if b.stored != nil && !b.stored(p) {
			b.early = append(b.early, p)
		}
	}
	b.committed = append(b.committed, req.Positions...)
	return &sdk.CommitResponse{}, nil
}

func (b *broker) Republish(_ context.Context, req *sdk.RepublishRequest) (*sdk.RepublishResponse, error) {
	b.mu.Lock()
	during := b.during
	b.mu.Unlock()
	if during != nil {
		during()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.down != nil {
		return nil, b.down
	}
	resp := &sdk.RepublishResponse{Results: make([]sdk.RepublishResult, len(req.Messages))}
	for i, m := range req.Messages {
		if err := b.refuse[m.ID]; err != nil || b.refuseAny != nil {
			if err == nil {
				err = b.refuseAny
			}
			resp.Results[i] = sdk.RepublishResult{ID: m.ID, Err: err}
			continue
		}
		b.republished = append(b.republished, m)
		resp.Results[i] = sdk.RepublishResult{ID: m.ID, Acked: true}
	}
	return resp, nil
}

func (b *broker) set(fn func(b *broker)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fn(b)
}

func (b *broker) republishedIDs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	ids := make([]string, len(b.republished))
	for i, m := range b.republished {
		ids[i] = m.ID
	}
	return ids
}

// sources is the plugin host's view of one source named "kafka".
type sources struct{ b *broker }

func (s sources) SourceNames() []string { return []string{"kafka"} }
func (s sources) Source(name string) (sdk.DLQSource, error) {
	if name != "kafka" {
		return nil, derrors.ErrNotFound
	}
	return s.b, nil
}
func (s sources) Running(name string) bool {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	return name == "kafka" && s.b.running
}

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// clock is a settable now. It can pace a daemon's lease renewals
// (dlq.SetClaimPace(svc, c.ticks, c.renewed)): set hands the new time to
// each renewal loop and waits until each renewed its lease at it, so that
// a lease is renewed as often as the clock moves, however fast or slow the
// machine is, and never outrun by the test.
type clock struct {
	mu   sync.Mutex
	t    time.Time
	subs map[*tickSub]struct{}
	acks chan struct{}
}

type tickSub struct {
	ch   chan time.Time
	gone chan struct{}
}

// clockWait bounds how long set waits for a renewal loop (a renewal that
// failed never reports back).
const clockWait = 10 * time.Second

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	subs := make([]*tickSub, 0, len(c.subs))
	for s := range c.subs {
		subs = append(subs, s)
	}
	acks := c.acks
	c.mu.Unlock()
	handed := 0
	for _, s := range subs {
		select {
		case s.ch <- t:
			handed++
		case <-s.gone:
		case <-time.After(clockWait):
		}
	}
	for ; handed > 0; handed-- {
		select {
		case <-acks:
		case <-time.After(clockWait):
			return
		}
	}
}

// ticks is a renewal loop's pace: a tick each time the clock moves.
func (c *clock) ticks() (<-chan time.Time, func()) {
	s := &tickSub{ch: make(chan time.Time), gone: make(chan struct{})}
	c.mu.Lock()
	if c.subs == nil {
		c.subs, c.acks = map[*tickSub]struct{}{}, make(chan struct{}, 64)
	}
	c.subs[s] = struct{}{}
	c.mu.Unlock()
	return s.ch, func() {
		c.mu.Lock()
		delete(c.subs, s)
		c.mu.Unlock()
		close(s.gone)
	}
}

// renewed reports a renewal done (after a tick of ticks).
func (c *clock) renewed() {
	c.mu.Lock()
	acks := c.acks
	c.mu.Unlock()
	select {
	case acks <- struct{}{}:
	default:
	}
}

type fixture struct {
	store  store.Store
	broker *broker
	svc    *dlq.Service
	ops    *bulk.Service
	clock  *clock
	policy dlq.Policy
}

// backoffPolicy is exact (no jitter) so the schedule can be asserted:
// 1m, 2m, 4m, ...
var backoffPolicy = retry.Policy{Initial: time.Minute, Multiplier: 2, Max: time.Hour, Jitter: retry.JitterNone}

// each runs fn on a fresh SQLite and a fresh PostgreSQL state store.
func each(t *testing.T, auto bool, fn func(t *testing.T, f *fixture)) {
	storetest.Each(t, func(t *testing.T, _ context.Context, st store.Store) {
		f := &fixture{store: st, broker: newBroker(), clock: &clock{t: t0},
			policy: dlq.Policy{AutoRetry: auto, MaxRetries: 3, Backoff: backoffPolicy, Lease: 30 * time.Second}}
		metrics := dlq.NewMetrics(nil, st, nil, periodic.New(nil))
		f.svc = dlq.NewService(st, sources{f.broker}, func() dlq.Policy { return f.policy }, "daemon-a", daemonLog(t, "daemon-a"), metrics)
		dlq.SetClock(f.svc, f.clock.now)
		f.ops = bulk.NewService(f.svc, st, daemonLog(t, "daemon-a"))
		fn(t, f)
	})
}

func (f *fixture) ingest(t *testing.T, n int) []uuid.UUID {
	t.Helper()
	batch := make([]dlq.Incoming, n)
	for i := range batch {
		batch[i] = dlq.Incoming{
			Position:      dlq.Position{Source: "kafka", Topic: "orders.dlq.v1", Offset: int64(i)},
			OriginalTopic: "orders.events.v1",
			ErrorMessage:  "boom",
			Key:           []byte(fmt.Sprintf("k%d", i)),
			Headers:       []dlq.Header{{Key: []byte("trace-id"), Value: []byte("abc")}},
			Payload:       []byte(fmt.Sprintf(`{"n":%d}`, i)),
		}
	}
	opts := dlq.IngestOptions{Now: f.clock.now(), MaxRetries: f.policy.MaxRetries}
	if f.policy.AutoRetry {
		first := f.clock.now().Add(f.policy.Backoff.Delay(0))
		opts.FirstRetryAt = func() *time.Time { return &first }
	}
	_, err := f.store.IngestDLQ(testsvc.Context(t, 30*time.Second), batch, opts)
	require.NoError(t, err)
	msgs, total, err := f.store.ListDLQ(testsvc.Context(t, 30*time.Second), dlq.ListFilter{Topic: "orders.dlq.v1", Page: 1, PageSize: 1000})
	require.NoError(t, err)
	require.EqualValues(t, n, total)
	ids := make([]uuid.UUID, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids
}

func (f *fixture) get(t *testing.T, id uuid.UUID) *dlq.Message {
	t.Helper()
	m, err := f.svc.Get(testsvc.Context(t, 30*time.Second), id)
	require.NoError(t, err)
	return m
}
