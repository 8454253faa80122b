package dlq_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/intake"
	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
	"github.com/lifecycled/lifecycled/daemon/internal/retry"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

// sequence returns successive draws from vals, safe for the intake's
// concurrent store workers.
func sequence(vals ...float64) func() float64 {
	var mu sync.Mutex
	i := 0
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		v := vals[i%len(vals)]
		i++
		return v
	}
}

func (f *fixture) intake(t *testing.T, st dlq.Store, rnd func() float64) *intake.Pipeline {
	in := intake.New(st, sources{f.broker}, func() dlq.Policy { return f.policy },
		intake.Config{BatchSize: 100, Wait: 20 * time.Millisecond, Now: f.clock.now, Jitter: rnd}, hclog.NewNullLogger(), intake.NewMetrics(nil, periodic.New(nil)))
	require.NoError(t, in.Start(testsvc.Context(t, time.Minute)))
	t.Cleanup(func() { _ = in.Stop(testsvc.Context(t, time.Minute)) })
	return in
}

func (f *fixture) all(t *testing.T, topic string) map[int64]dlq.Message {
	t.Helper()
	msgs, _, err := f.store.ListDLQ(testsvc.Context(t, 30*time.Second), dlq.ListFilter{Topic: topic, Page: 1, PageSize: 1000})
	require.NoError(t, err)
	out := map[int64]dlq.Message{}
	for _, m := range msgs {
		out[m.Position.Offset] = m
	}
	return out
}

// With full jitter and initial_delay 1m, a whole batch once shared one
// first retry time (near zero for some batches): each message draws its own.
func TestIntakeGivesEachMessageItsOwnFirstRetryJitter(t *testing.T) {
	each(t, true, func(t *testing.T, f *fixture) {
		f.policy.Backoff = retry.Policy{Initial: time.Minute, Multiplier: 2, Max: time.Hour, Jitter: retry.JitterFull}
		f.broker.set(func(b *broker) { b.queue = deadLetters(0, 8) })
		draws := []float64{1.0 / 16, 2.0 / 16, 3.0 / 16, 4.0 / 16, 5.0 / 16, 6.0 / 16, 7.0 / 16, 8.0 / 16}
		f.intake(t, f.store, sequence(draws...))
		var got map[int64]dlq.Message
		testsvc.Eventually(t, 30*time.Second, func() bool { got = f.all(t, "orders.dlq.v1"); return len(got) == 8 }, "stored")
		for off := int64(0); off < 8; off++ {
			want := t0.Add(time.Duration(draws[off] * float64(time.Minute)))
			require.True(t, want.Equal(*got[off].NextRetryAt), "offset %d: first retry at %v, want %v", off, got[off].NextRetryAt, want)
		}
	})
}

// Failed republishes: each message draws its own next retry time too.
func TestFailedRetriesGetEachTheirOwnJitter(t *testing.T) {
	each(t, true, func(t *testing.T, f *fixture) {
		f.policy.Backoff = retry.Policy{Initial: time.Minute, Multiplier: 2, Max: time.Hour, Jitter: retry.JitterFull}
		ids := f.ingest(t, 4)
		f.broker.set(func(b *broker) {
			for _, id := range ids {
				b.refuse[id.String()] = sdk.Permanent(errors.New("INVALID_RECORD"))
			}
		})
		dlq.SetRand(f.svc, sequence(0.25, 0.5, 0.75, 1.0/8))
		_, err := f.ops.RetryAll(testsvc.Context(t, 30*time.Second), "orders.dlq.v1")
		require.NoError(t, err)
		seen := map[time.Time]bool{}
		for _, id := range ids {
			next := f.get(t, id).NextRetryAt
			// Attempt 1 backs off 2m; full jitter spreads it over [0, 2m).
			d := next.Sub(t0)
			require.Contains(t, []time.Duration{30 * time.Second, time.Minute, 90 * time.Second, 15 * time.Second}, d)
			seen[*next] = true
		}
		require.Len(t, seen, 4, "four messages, four retry times")
	})
}

// Why a message died is on it (last_error, attempts); revive gives it
// another chance, once it is DEAD only.
func TestReviveAndTheHistoryOfAttempts(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		ids := f.ingest(t, 2)
		id, other := ids[0], ids[1]
		otherBefore := f.get(t, other)
		f.broker.set(func(b *broker) { b.refuse[id.String()] = sdk.Permanent(errors.New("MESSAGE_TOO_LARGE")) })
		_, err := f.svc.Revive(ctx, id, 1000)
		var nr *dlq.NotRevivableError
		require.ErrorAs(t, err, &nr)
		require.Equal(t, "message is not DEAD: status=PENDING, retry_count=0/3; only DEAD messages can be revived", nr.Reason)

		for i := 0; i < 3; i++ {
			f.clock.set(t0.Add(time.Duration(i) * time.Minute))
			_, err := f.svc.Retry(ctx, id)
			require.ErrorIs(t, err, dlq.ErrRepublishFailed)
		}
		dead := f.get(t, id)
		require.Equal(t, dlq.StatusDead, dead.Status)
		require.Equal(t, "MESSAGE_TOO_LARGE", dead.LastError)
		require.Len(t, dead.Attempts, 3)
		for i, a := range dead.Attempts {
			outcome := dlq.OutcomeFailed
			if i == 2 {
				outcome = dlq.OutcomeDead
			}
			require.Equal(t, dlq.Attempt{At: t0.Add(time.Duration(i) * time.Minute), Outcome: outcome, Error: "MESSAGE_TOO_LARGE",
				Trigger: dlq.TriggerManual}, a)
		}

		f.clock.set(t0.Add(time.Hour))
		m, err := f.svc.Revive(ctx, id, 1000)
		require.NoError(t, err)
		require.Equal(t, dlq.StatusPending, m.Status)
		require.Zero(t, m.RetryCount)
		require.Equal(t, 3, m.MaxRetries)
		require.Len(t, m.Attempts, 4, "the history stays")
		uid := uint32(1000)
		require.Equal(t, dlq.Attempt{At: t0.Add(time.Hour), Outcome: dlq.OutcomeRevived, UID: &uid}, m.Attempts[3])
		require.Equal(t, m, f.get(t, id))

		_, err = f.svc.Revive(ctx, id, 1000)
		require.ErrorAs(t, err, &nr, "not DEAD any more")
		_, err = f.svc.Revive(ctx, uuid.New(), 1000)
		require.ErrorIs(t, err, derrors.ErrNotFound)

		// Another chance, and this time the broker takes it.
		f.broker.set(func(b *broker) { delete(b.refuse, id.String()) })
		m, err = f.svc.Retry(ctx, id)
		require.NoError(t, err)
		got := f.get(t, id)
		require.Equal(t, dlq.StatusResolved, got.Status)
		require.NotNil(t, got.RepublishedAt)
		require.Equal(t, "MESSAGE_TOO_LARGE", got.LastError, "the last failure stays readable")
		require.Equal(t, dlq.OutcomeResolved, got.Attempts[4].Outcome)

		require.Equal(t, otherBefore, f.get(t, other), "the other message did not change")
	})
}

// A message too large to cross the plugin connection whole arrives without
// its value: it is stored DEAD with the reason, never dropped, never
// republished, and cannot be revived.
func TestIntakeStoresATruncatedMessageDeadWithTheReason(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		queue := deadLetters(0, 3)
		queue[1].Value, queue[1].Truncated, queue[1].OriginalSize = nil, true, 70<<20
		f.broker.set(func(b *broker) { b.queue = queue })
		f.intake(t, f.store, nil)
		var got map[int64]dlq.Message
		testsvc.Eventually(t, 30*time.Second, func() bool { got = f.all(t, "orders.dlq.v1"); return len(got) == 3 }, "stored")
		m := got[1]
		ok := got[0]
		require.Equal(t, dlq.StatusDead, m.Status)
		require.True(t, m.Truncated)
		require.Contains(t, m.LastError, "73400320 bytes")
		require.Equal(t, "NPE", m.ErrorMessage)
		require.Equal(t, dlq.OutcomeTruncated, m.Attempts[0].Outcome)
		require.Equal(t, dlq.StatusPending, ok.Status)
		require.False(t, ok.Truncated)

		_, err := f.svc.Revive(ctx, m.ID, 0)
		var nr *dlq.NotRevivableError
		require.ErrorAs(t, err, &nr)
		require.Contains(t, nr.Reason, "not kept")
		require.Empty(t, f.broker.republishedIDs())
	})
}

// pickyStore is the real store refusing any batch that holds one position,
// unless that message comes without its interpretation, as a database
// refuses a value it cannot hold.
type pickyStore struct {
	dlq.Store
	poison int64
}

func (s *pickyStore) IngestDLQ(ctx context.Context, batch []dlq.Incoming, opts dlq.IngestOptions) (dlq.IngestResult, error) {
	for _, in := range batch {
		if in.Position.Offset == s.poison && in.LastError == "" {
			return dlq.IngestResult{}, fmt.Errorf("ERROR: value out of range (SQLSTATE 22008)")
		}
	}
	return s.Store.IngestDLQ(ctx, batch, opts)
}

// One message the store refuses once held up its whole source forever
// (the batch was retried as is): it is stored as received, with the reason,
// and everything after it goes on.
func TestIntakeStoresAMessageTheStoreRefusesAsReceived(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		ps := &pickyStore{Store: f.store, poison: 3}
		f.broker.set(func(b *broker) { b.queue = deadLetters(0, 10) })
		f.intake(t, ps, nil)
		var got map[int64]dlq.Message
		testsvc.Eventually(t, time.Minute, func() bool { got = f.all(t, "orders.dlq.v1"); return len(got) == 10 }, "all ten stored")
		m := got[3]
		require.Contains(t, m.LastError, "stored as received")
		require.Contains(t, m.LastError, "SQLSTATE 22008")
		require.Equal(t, []byte(`{"n":3}`), m.Payload, "kept byte for byte")
		require.Equal(t, []dlq.Header{{Key: []byte("kafka_dlt-exception-message"), Value: []byte("NPE")}}, m.Headers)
		require.Equal(t, "NPE", got[4].ErrorMessage, "the others as usual")
		testsvc.Eventually(t, 30*time.Second, func() bool {
			f.broker.mu.Lock()
			defer f.broker.mu.Unlock()
			return len(f.broker.committed) == 10
		}, "committed once stored")
	})
}
