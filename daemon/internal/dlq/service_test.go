package dlq_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
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
		dlq.SetClock(f.svc, nil, f.clock.now)
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

func TestRetryResolvesOnlyOnTheBrokersAck(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		id := f.ingest(t, 1)[0]
		m, err := f.svc.Retry(ctx, id)
		require.NoError(t, err)
		require.Equal(t, dlq.StatusResolved, m.Status)
		require.Equal(t, dlq.StatusResolved, f.get(t, id).Status)

		require.Len(t, f.broker.republished, 1)
		sent := f.broker.republished[0]
		require.Equal(t, "orders.events.v1", sent.Topic)
		require.Equal(t, []byte("k0"), sent.Key)
		require.Equal(t, []byte(`{"n":0}`), sent.Value)
		require.Equal(t, []sdk.Header{
			{Key: []byte("trace-id"), Value: []byte("abc")},
			{Key: []byte(dlq.HeaderID), Value: []byte(id.String())},
			{Key: []byte(dlq.HeaderRetryCount), Value: []byte("1")},
		}, sent.Headers)

		_, err = f.svc.Retry(ctx, id)
		var nr *dlq.NotRetryableError
		require.ErrorAs(t, err, &nr)
		require.Equal(t, "message is not retryable: status=RESOLVED, retry_count=0/3", nr.Reason)
		require.Len(t, f.broker.republished, 1, "a resolved message is not sent again")

		_, err = f.svc.Retry(ctx, uuid.New())
		require.ErrorIs(t, err, derrors.ErrNotFound)
	})
}

func TestBrokerRefusalCountsUntilDead(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		id := f.ingest(t, 1)[0]
		f.broker.set(func(b *broker) { b.refuse[id.String()] = sdk.Permanent(errors.New("MESSAGE_TOO_LARGE")) })
		for attempt := 1; attempt <= 3; attempt++ {
			_, err := f.svc.Retry(ctx, id)
			require.ErrorIs(t, err, dlq.ErrRepublishFailed)
			require.ErrorContains(t, err, "MESSAGE_TOO_LARGE")
			m := f.get(t, id)
			require.Equal(t, attempt, m.RetryCount)
			want := dlq.StatusPending
			if attempt == 3 {
				want = dlq.StatusDead
			}
			require.Equal(t, want, m.Status, "after attempt %d", attempt)
		}
		_, err := f.svc.Retry(ctx, id)
		var nr *dlq.NotRetryableError
		require.ErrorAs(t, err, &nr)
		require.Equal(t, "message is not retryable: status=DEAD, retry_count=3/3", nr.Reason)
	})
}

func TestUnavailableSourceChangesNothing(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		id := f.ingest(t, 1)[0]
		before := f.get(t, id)

		f.broker.set(func(b *broker) { b.running = false })
		_, err := f.svc.Retry(ctx, id)
		require.ErrorIs(t, err, derrors.ErrUnavailable)
		require.ErrorContains(t, err, `source "kafka" is not running`)

		// Reachable plugin, unreachable broker: the call fails as a whole.
		f.broker.set(func(b *broker) {
			b.running, b.down = true, sdk.Unavailable(errors.New("dial tcp 10.0.0.9:9092: connection refused"))
		})
		_, err = f.svc.Retry(ctx, id)
		require.ErrorIs(t, err, derrors.ErrUnavailable)
		require.ErrorContains(t, err, "the message stays PENDING")

		// A per-message retryable refusal (NOT_ENOUGH_REPLICAS) is the
		// broker's fault, not the message's: not counted either.
		f.broker.set(func(b *broker) {
			b.down = nil
			b.refuse[id.String()] = sdk.Retryable(errors.New("NOT_ENOUGH_REPLICAS"), 0)
		})
		_, err = f.svc.Retry(ctx, id)
		require.ErrorIs(t, err, derrors.ErrUnavailable)

		after := f.get(t, id)
		require.Equal(t, dlq.StatusPending, after.Status)
		require.Equal(t, before.RetryCount, after.RetryCount)
		require.Empty(t, f.broker.republishedIDs())
	})
}

func TestRetryAllCountsEveryOutcomeAcrossPages(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		ids := f.ingest(t, 250)
		refused := map[string]bool{ids[7].String(): true, ids[120].String(): true, ids[249].String(): true}
		f.broker.set(func(b *broker) {
			for id := range refused {
				b.refuse[id] = sdk.Permanent(errors.New("INVALID_RECORD"))
			}
		})
		retryable := func(topic string) int64 {
			n, err := f.svc.CountRetryable(ctx, topic)
			require.NoError(t, err)
			return n
		}
		require.EqualValues(t, 250, retryable("orders.dlq.v1"), "dry run by DLQ topic")
		require.EqualValues(t, 250, retryable("orders.events.v1"), "dry run by original topic")
		require.EqualValues(t, 0, retryable("payments.dlq.v1"))
		require.Empty(t, f.broker.republishedIDs(), "a dry run republishes nothing")
		require.Equal(t, dlq.StatusPending, f.get(t, ids[0]).Status, "and claims nothing")

		res, err := f.svc.RetryAll(ctx, "orders.dlq.v1")
		require.NoError(t, err)
		require.Equal(t, dlq.RetryAllResult{Retried: 247, Failed: 3}, res)
		require.EqualValues(t, 3, retryable("orders.dlq.v1"), "the refused ones are still retryable")

		sent := f.broker.republishedIDs()
		require.Len(t, sent, 247)
		sort.Strings(sent)
		for i := 1; i < len(sent); i++ {
			require.NotEqual(t, sent[i-1], sent[i], "each message republished once")
		}
		for _, id := range ids {
			m := f.get(t, id)
			if refused[id.String()] {
				require.Equal(t, dlq.StatusPending, m.Status)
				require.Equal(t, 1, m.RetryCount)
			} else {
				require.Equal(t, dlq.StatusResolved, m.Status)
			}
		}

		// Second pass: only the three refused ones are retryable.
		f.broker.set(func(b *broker) { b.refuse = map[string]error{} })
		res, err = f.svc.RetryAll(ctx, "orders.dlq.v1")
		require.NoError(t, err)
		require.Equal(t, dlq.RetryAllResult{Retried: 3}, res)
		require.EqualValues(t, 0, retryable("orders.dlq.v1"))
	})
}

func TestRetryAllWithTheBrokerDownLeavesEveryMessagePending(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		ids := f.ingest(t, 150)
		f.broker.set(func(b *broker) { b.down = sdk.Unavailable(errors.New("all brokers down")) })
		res, err := f.svc.RetryAll(ctx, "orders.dlq.v1")
		require.ErrorIs(t, err, derrors.ErrUnavailable)
		require.Equal(t, dlq.RetryAllResult{Unavailable: 150}, res)
		for _, id := range ids {
			m := f.get(t, id)
			require.Equal(t, dlq.StatusPending, m.Status)
			require.Zero(t, m.RetryCount)
		}
	})
}

func TestRetryLoopFollowsTheBackoffScheduleToDead(t *testing.T) {
	each(t, true, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		ids := f.ingest(t, 2)
		ok, bad := ids[0], ids[1]
		f.broker.set(func(b *broker) { b.refuse[bad.String()] = sdk.Permanent(errors.New("consumer rejects it")) })
		loop := dlq.NewRetryLoop(f.svc, func() time.Duration { return time.Hour })
		at := func(d time.Duration) {
			t.Helper()
			f.clock.set(t0.Add(d))
			require.NoError(t, loop.RunOnce(ctx))
		}
		require.WithinDuration(t, t0.Add(time.Minute), *f.get(t, ok).NextRetryAt, 0)

		at(59 * time.Second)
		require.Empty(t, f.broker.republishedIDs(), "nothing is due before initial_delay")

		at(time.Minute)
		require.Equal(t, []string{ok.String()}, f.broker.republishedIDs())
		require.Equal(t, dlq.StatusResolved, f.get(t, ok).Status)
		m := f.get(t, bad)
		require.Equal(t, dlq.StatusPending, m.Status)
		require.Equal(t, 1, m.RetryCount)
		require.WithinDuration(t, t0.Add(time.Minute+2*time.Minute), *m.NextRetryAt, 0, "second attempt after 2m")

		at(3*time.Minute - time.Second)
		require.Equal(t, 1, f.get(t, bad).RetryCount, "not due yet")
		at(3 * time.Minute)
		m = f.get(t, bad)
		require.Equal(t, 2, m.RetryCount)
		require.WithinDuration(t, t0.Add(3*time.Minute+4*time.Minute), *m.NextRetryAt, 0, "third attempt after 4m")

		at(7 * time.Minute)
		m = f.get(t, bad)
		require.Equal(t, dlq.StatusDead, m.Status)
		require.Equal(t, 3, m.RetryCount)

		at(10 * time.Hour)
		require.Equal(t, dlq.StatusDead, f.get(t, bad).Status, "DEAD is terminal")
		require.Len(t, f.broker.republishedIDs(), 1)
	})
}

func TestRetryLoopOffStillReturnsExpiredLeases(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		id := f.ingest(t, 1)[0]
		// Another daemon claimed it and died mid-republish.
		_, err := f.store.ClaimDLQ(ctx, id, dlq.Claim{Owner: "daemon-b", Now: t0, LeaseUntil: t0.Add(30 * time.Second)})
		require.NoError(t, err)
		require.Equal(t, dlq.StatusRetrying, f.get(t, id).Status)

		loop := dlq.NewRetryLoop(f.svc, func() time.Duration { return time.Hour })
		f.clock.set(t0.Add(29 * time.Second))
		require.NoError(t, loop.RunOnce(ctx))
		require.Equal(t, dlq.StatusRetrying, f.get(t, id).Status, "lease still held")

		f.clock.set(t0.Add(31 * time.Second))
		require.NoError(t, loop.RunOnce(ctx))
		m := f.get(t, id)
		require.Equal(t, dlq.StatusPending, m.Status)
		require.Zero(t, m.RetryCount, "a dead daemon's attempt is not the message's failure")
		require.Empty(t, f.broker.republishedIDs(), "automatic retries are off")
	})
}
