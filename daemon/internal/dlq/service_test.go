package dlq_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/dlqtest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

func TestRetryResolvesOnlyOnTheBrokersAck(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		id := f.Ingest(t, 1)[0]
		m, err := f.Svc.Retry(ctx, id)
		require.NoError(t, err)
		require.Equal(t, dlq.StatusResolved, m.Status)
		require.Equal(t, dlq.StatusResolved, f.Get(t, id).Status)

		require.Len(t, f.Broker.Republished, 1)
		sent := f.Broker.Republished[0]
		require.Equal(t, "orders.events.v1", sent.Topic)
		require.Equal(t, []byte("k0"), sent.Key)
		require.Equal(t, []byte(`{"n":0}`), sent.Value)
		require.Equal(t, []sdk.Header{
			{Key: []byte("trace-id"), Value: []byte("abc")},
			{Key: []byte(dlq.HeaderID), Value: []byte(id.String())},
			{Key: []byte(dlq.HeaderRetryCount), Value: []byte("1")},
		}, sent.Headers)

		_, err = f.Svc.Retry(ctx, id)
		var nr *dlq.NotRetryableError
		require.ErrorAs(t, err, &nr)
		require.Equal(t, "message is not retryable: status=RESOLVED, retry_count=0/3", nr.Reason)
		require.Len(t, f.Broker.Republished, 1, "a resolved message is not sent again")

		_, err = f.Svc.Retry(ctx, uuid.New())
		require.ErrorIs(t, err, derrors.ErrNotFound)
	})
}

func TestBrokerRefusalCountsUntilDead(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		id := f.Ingest(t, 1)[0]
		f.Broker.Set(func(b *dlqtest.Broker) { b.Refuse[id.String()] = sdk.Permanent(errors.New("MESSAGE_TOO_LARGE")) })
		for attempt := 1; attempt <= 3; attempt++ {
			_, err := f.Svc.Retry(ctx, id)
			require.ErrorIs(t, err, dlq.ErrRepublishFailed)
			require.ErrorContains(t, err, "MESSAGE_TOO_LARGE")
			m := f.Get(t, id)
			require.Equal(t, attempt, m.RetryCount)
			want := dlq.StatusPending
			if attempt == 3 {
				want = dlq.StatusDead
			}
			require.Equal(t, want, m.Status, "after attempt %d", attempt)
		}
		_, err := f.Svc.Retry(ctx, id)
		var nr *dlq.NotRetryableError
		require.ErrorAs(t, err, &nr)
		require.Equal(t, "message is not retryable: status=DEAD, retry_count=3/3", nr.Reason)
	})
}

func TestUnavailableSourceChangesNothing(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		id := f.Ingest(t, 1)[0]
		before := f.Get(t, id)

		f.Broker.Set(func(b *dlqtest.Broker) { b.Running = false })
		_, err := f.Svc.Retry(ctx, id)
		require.ErrorIs(t, err, derrors.ErrUnavailable)
		require.ErrorContains(t, err, `source "kafka" is not running`)

		// Reachable plugin, unreachable broker: the call fails as a whole.
		f.Broker.Set(func(b *dlqtest.Broker) {
			b.Running, b.Down = true, sdk.Unavailable(errors.New("dial tcp 10.0.0.9:9092: connection refused"))
		})
		_, err = f.Svc.Retry(ctx, id)
		require.ErrorIs(t, err, derrors.ErrUnavailable)
		require.ErrorContains(t, err, "the message stays PENDING")

		// A per-message retryable refusal (NOT_ENOUGH_REPLICAS) is the
		// broker's fault, not the message's: not counted either.
		f.Broker.Set(func(b *dlqtest.Broker) {
			b.Down = nil
			b.Refuse[id.String()] = sdk.Retryable(errors.New("NOT_ENOUGH_REPLICAS"), 0)
		})
		_, err = f.Svc.Retry(ctx, id)
		require.ErrorIs(t, err, derrors.ErrUnavailable)

		after := f.Get(t, id)
		require.Equal(t, dlq.StatusPending, after.Status)
		require.Equal(t, before.RetryCount, after.RetryCount)
		require.Empty(t, f.Broker.RepublishedIDs())
	})
}

func TestRetryLoopFollowsTheBackoffScheduleToDead(t *testing.T) {
	dlqtest.Each(t, true, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		ids := f.Ingest(t, 2)
		ok, bad := ids[0], ids[1]
		f.Broker.Set(func(b *dlqtest.Broker) { b.Refuse[bad.String()] = sdk.Permanent(errors.New("consumer rejects it")) })
		loop := dlq.NewRetryLoop(f.Svc, func() time.Duration { return time.Hour })
		at := func(d time.Duration) {
			t.Helper()
			f.Clock.Set(dlqtest.T0.Add(d))
			require.NoError(t, loop.RunOnce(ctx))
		}
		require.WithinDuration(t, dlqtest.T0.Add(time.Minute), *f.Get(t, ok).NextRetryAt, 0)

		at(59 * time.Second)
		require.Empty(t, f.Broker.RepublishedIDs(), "nothing is due before initial_delay")

		at(time.Minute)
		require.Equal(t, []string{ok.String()}, f.Broker.RepublishedIDs())
		require.Equal(t, dlq.StatusResolved, f.Get(t, ok).Status)
		m := f.Get(t, bad)
		require.Equal(t, dlq.StatusPending, m.Status)
		require.Equal(t, 1, m.RetryCount)
		require.WithinDuration(t, dlqtest.T0.Add(time.Minute+2*time.Minute), *m.NextRetryAt, 0, "second attempt after 2m")

		at(3*time.Minute - time.Second)
		require.Equal(t, 1, f.Get(t, bad).RetryCount, "not due yet")
		at(3 * time.Minute)
		m = f.Get(t, bad)
		require.Equal(t, 2, m.RetryCount)
		require.WithinDuration(t, dlqtest.T0.Add(3*time.Minute+4*time.Minute), *m.NextRetryAt, 0, "third attempt after 4m")

		at(7 * time.Minute)
		m = f.Get(t, bad)
		require.Equal(t, dlq.StatusDead, m.Status)
		require.Equal(t, 3, m.RetryCount)

		at(10 * time.Hour)
		require.Equal(t, dlq.StatusDead, f.Get(t, bad).Status, "DEAD is terminal")
		require.Len(t, f.Broker.RepublishedIDs(), 1)
	})
}

func TestRetryLoopOffStillReturnsExpiredLeases(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		id := f.Ingest(t, 1)[0]
		// Another daemon claimed it and died mid-republish.
		_, err := f.Store.ClaimDLQ(ctx, id, dlq.Claim{Owner: "daemon-b", Now: dlqtest.T0, LeaseUntil: dlqtest.T0.Add(30 * time.Second)})
		require.NoError(t, err)
		require.Equal(t, dlq.StatusRetrying, f.Get(t, id).Status)

		loop := dlq.NewRetryLoop(f.Svc, func() time.Duration { return time.Hour })
		f.Clock.Set(dlqtest.T0.Add(29 * time.Second))
		require.NoError(t, loop.RunOnce(ctx))
		require.Equal(t, dlq.StatusRetrying, f.Get(t, id).Status, "lease still held")

		f.Clock.Set(dlqtest.T0.Add(31 * time.Second))
		require.NoError(t, loop.RunOnce(ctx))
		m := f.Get(t, id)
		require.Equal(t, dlq.StatusPending, m.Status)
		require.Zero(t, m.RetryCount, "a dead daemon's attempt is not the message's failure")
		require.Empty(t, f.Broker.RepublishedIDs(), "automatic retries are off")
	})
}
