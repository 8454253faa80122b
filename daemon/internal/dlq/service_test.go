package dlq_test

import (
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/bulk"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

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

		res, err := f.ops.RetryAll(ctx, "orders.dlq.v1")
		require.NoError(t, err)
		require.Equal(t, bulk.RetryAllResult{Retried: 247, Failed: 3}, res)
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
		res, err = f.ops.RetryAll(ctx, "orders.dlq.v1")
		require.NoError(t, err)
		require.Equal(t, bulk.RetryAllResult{Retried: 3}, res)
		require.EqualValues(t, 0, retryable("orders.dlq.v1"))
	})
}

func TestRetryAllWithTheBrokerDownLeavesEveryMessagePending(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		ids := f.ingest(t, 150)
		f.broker.set(func(b *broker) { b.down = sdk.Unavailable(errors.New("all brokers down")) })
		res, err := f.ops.RetryAll(ctx, "orders.dlq.v1")
		require.ErrorIs(t, err, derrors.ErrUnavailable)
		require.Equal(t, bulk.RetryAllResult{Unavailable: 150}, res)
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
