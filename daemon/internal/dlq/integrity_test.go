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
	"github.com/lifecycled/lifecycled/daemon/internal/retry"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

// Failed republishes: each message draws its own next retry time too.
func TestFailedRetriesGetEachTheirOwnJitter(t *testing.T) {
	dlqtest.Each(t, true, func(t *testing.T, f *dlqtest.Fixture) {
		f.Policy.Backoff = retry.Policy{Initial: time.Minute, Multiplier: 2, Max: time.Hour, Jitter: retry.JitterFull}
		ids := f.Ingest(t, 4)
		f.Broker.Set(func(b *dlqtest.Broker) {
			for _, id := range ids {
				b.Refuse[id.String()] = sdk.Permanent(errors.New("INVALID_RECORD"))
			}
		})
		f.Reconfigure(t, dlq.WithJitter(dlqtest.Sequence(0.25, 0.5, 0.75, 1.0/8)))
		_, err := f.Ops.RetryAll(testsvc.Context(t, 30*time.Second), "orders.dlq.v1")
		require.NoError(t, err)
		seen := map[time.Time]bool{}
		for _, id := range ids {
			next := f.Get(t, id).NextRetryAt
			// Attempt 1 backs off 2m; full jitter spreads it over [0, 2m).
			d := next.Sub(dlqtest.T0)
			require.Contains(t, []time.Duration{30 * time.Second, time.Minute, 90 * time.Second, 15 * time.Second}, d)
			seen[*next] = true
		}
		require.Len(t, seen, 4, "four messages, four retry times")
	})
}

// Why a message died is on it (last_error, attempts); revive gives it
// another chance, once it is DEAD only.
func TestReviveAndTheHistoryOfAttempts(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		ids := f.Ingest(t, 2)
		id, other := ids[0], ids[1]
		otherBefore := f.Get(t, other)
		f.Broker.Set(func(b *dlqtest.Broker) { b.Refuse[id.String()] = sdk.Permanent(errors.New("MESSAGE_TOO_LARGE")) })
		_, err := f.Svc.Revive(ctx, id, 1000)
		var nr *dlq.NotRevivableError
		require.ErrorAs(t, err, &nr)
		require.Equal(t, "message is not DEAD: status=PENDING, retry_count=0/3; only DEAD messages can be revived", nr.Reason)

		for i := 0; i < 3; i++ {
			f.Clock.Set(dlqtest.T0.Add(time.Duration(i) * time.Minute))
			_, err := f.Svc.Retry(ctx, id)
			require.ErrorIs(t, err, dlq.ErrRepublishFailed)
		}
		dead := f.Get(t, id)
		require.Equal(t, dlq.StatusDead, dead.Status)
		require.Equal(t, "MESSAGE_TOO_LARGE", dead.LastError)
		require.Len(t, dead.Attempts, 3)
		for i, a := range dead.Attempts {
			outcome := dlq.OutcomeFailed
			if i == 2 {
				outcome = dlq.OutcomeDead
			}
			require.Equal(t, dlq.Attempt{At: dlqtest.T0.Add(time.Duration(i) * time.Minute), Outcome: outcome, Error: "MESSAGE_TOO_LARGE",
				Trigger: dlq.TriggerManual}, a)
		}

		f.Clock.Set(dlqtest.T0.Add(time.Hour))
		m, err := f.Svc.Revive(ctx, id, 1000)
		require.NoError(t, err)
		require.Equal(t, dlq.StatusPending, m.Status)
		require.Zero(t, m.RetryCount)
		require.Equal(t, 3, m.MaxRetries)
		require.Len(t, m.Attempts, 4, "the history stays")
		uid := uint32(1000)
		require.Equal(t, dlq.Attempt{At: dlqtest.T0.Add(time.Hour), Outcome: dlq.OutcomeRevived, UID: &uid}, m.Attempts[3])
		require.Equal(t, m, f.Get(t, id))

		_, err = f.Svc.Revive(ctx, id, 1000)
		require.ErrorAs(t, err, &nr, "not DEAD any more")
		_, err = f.Svc.Revive(ctx, uuid.New(), 1000)
		require.ErrorIs(t, err, derrors.ErrNotFound)

		// Another chance, and this time the broker takes it.
		f.Broker.Set(func(b *dlqtest.Broker) { delete(b.Refuse, id.String()) })
		m, err = f.Svc.Retry(ctx, id)
		require.NoError(t, err)
		got := f.Get(t, id)
		require.Equal(t, dlq.StatusResolved, got.Status)
		require.NotNil(t, got.RepublishedAt)
		require.Equal(t, "MESSAGE_TOO_LARGE", got.LastError, "the last failure stays readable")
		require.Equal(t, dlq.OutcomeResolved, got.Attempts[4].Outcome)

		require.Equal(t, otherBefore, f.Get(t, other), "the other message did not change")
	})
}
