package intake_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/dlqtest"
	"github.com/lifecycled/lifecycled/daemon/internal/retry"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// With full jitter and initial_delay 1m, a whole batch once shared one
// first retry time (near zero for some batches): each message draws its own.
func TestIntakeGivesEachMessageItsOwnFirstRetryJitter(t *testing.T) {
	dlqtest.Each(t, true, func(t *testing.T, f *dlqtest.Fixture) {
		f.Policy.Backoff = retry.Policy{Initial: time.Minute, Multiplier: 2, Max: time.Hour, Jitter: retry.JitterFull}
		f.Broker.Set(func(b *dlqtest.Broker) { b.Queue = dlqtest.DeadLetters(0, 8) })
		draws := []float64{1.0 / 16, 2.0 / 16, 3.0 / 16, 4.0 / 16, 5.0 / 16, 6.0 / 16, 7.0 / 16, 8.0 / 16}
		f.StartIntake(t, f.Store, dlqtest.Sequence(draws...))
		var got map[int64]dlq.Message
		testsvc.Eventually(t, 30*time.Second, func() bool { got = f.StoredByOffset(t, "orders.dlq.v1"); return len(got) == 8 }, "stored")
		for off := int64(0); off < 8; off++ {
			want := dlqtest.T0.Add(time.Duration(draws[off] * float64(time.Minute)))
			require.True(t, want.Equal(*got[off].NextRetryAt), "offset %d: first retry at %v, want %v", off, got[off].NextRetryAt, want)
		}
	})
}

// A message too large to cross the plugin connection whole arrives without
// its value: it is stored DEAD with the reason, never dropped, never
// republished, and cannot be revived.
func TestIntakeStoresATruncatedMessageDeadWithTheReason(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		queue := dlqtest.DeadLetters(0, 3)
		queue[1].Value, queue[1].Truncated, queue[1].OriginalSize = nil, true, 70<<20
		f.Broker.Set(func(b *dlqtest.Broker) { b.Queue = queue })
		f.StartIntake(t, f.Store, nil)
		var got map[int64]dlq.Message
		testsvc.Eventually(t, 30*time.Second, func() bool { got = f.StoredByOffset(t, "orders.dlq.v1"); return len(got) == 3 }, "stored")
		m := got[1]
		ok := got[0]
		require.Equal(t, dlq.StatusDead, m.Status)
		require.True(t, m.Truncated)
		require.Contains(t, m.LastError, "73400320 bytes")
		require.Equal(t, "NPE", m.ErrorMessage)
		require.Equal(t, dlq.OutcomeTruncated, m.Attempts[0].Outcome)
		require.Equal(t, dlq.StatusPending, ok.Status)
		require.False(t, ok.Truncated)

		_, err := f.Svc.Revive(ctx, m.ID, 0)
		var nr *dlq.NotRevivableError
		require.ErrorAs(t, err, &nr)
		require.Contains(t, nr.Reason, "not kept")
		require.Empty(t, f.Broker.RepublishedIDs())
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
		if in.Position.Offset() == s.poison && in.LastError == "" {
			return dlq.IngestResult{}, fmt.Errorf("ERROR: value out of range (SQLSTATE 22008)")
		}
	}
	return s.Store.IngestDLQ(ctx, batch, opts)
}

// One message the store refuses once held up its whole source forever
// (the batch was retried as is): it is stored as received, with the reason,
// and everything after it goes on.
func TestIntakeStoresAMessageTheStoreRefusesAsReceived(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ps := &pickyStore{Store: f.Store, poison: 3}
		f.Broker.Set(func(b *dlqtest.Broker) { b.Queue = dlqtest.DeadLetters(0, 10) })
		f.StartIntake(t, ps, nil)
		var got map[int64]dlq.Message
		testsvc.Eventually(t, time.Minute, func() bool { got = f.StoredByOffset(t, "orders.dlq.v1"); return len(got) == 10 }, "all ten stored")
		m := got[3]
		require.Contains(t, m.LastError, "stored as received")
		require.Contains(t, m.LastError, "SQLSTATE 22008")
		require.Equal(t, []byte(`{"n":3}`), m.Payload, "kept byte for byte")
		require.Equal(t, []dlq.Header{{Key: []byte("kafka_dlt-exception-message"), Value: []byte("NPE")}}, m.Headers)
		require.Equal(t, "NPE", got[4].ErrorMessage, "the others as usual")
		testsvc.Eventually(t, 30*time.Second, func() bool {
			return f.Broker.CommittedCount() == 10
		}, "committed once stored")
	})
}

// PostgreSQL's jsonb refuses a number out of numeric's range that Go's
// json.Valid accepts. The one-by-one fallback kept the payload in its
// degraded copy, was refused again, and the source's intake never moved:
// the message is now stored without its JSON copy, with everything else
// read from its headers, and the intake goes on.
func TestIntakeStoresJSONTheStoreRefusesWithoutItsJSONCopy(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		const huge = `{"amount":1e1000000}`
		dls := dlqtest.DeadLetters(0, 10)
		dls[3].Value = []byte(huge)
		f.Broker.Set(func(b *dlqtest.Broker) { b.Queue = dls })
		f.StartIntake(t, f.Store, nil)
		var got map[int64]dlq.Message
		testsvc.Eventually(t, time.Minute, func() bool { got = f.StoredByOffset(t, "orders.dlq.v1"); return len(got) == 10 }, "all ten stored")
		m := got[3]
		require.Equal(t, []byte(huge), m.Payload, "kept byte for byte")
		require.Equal(t, "orders.events.v1", m.OriginalTopic, "what the headers and the source said is kept")
		require.Equal(t, "NPE", m.ErrorMessage)
		require.True(t, m.IsRetryable())
		if pg, ok := f.Store.(*store.Postgres); ok {
			var hasJSON bool
			require.NoError(t, pg.Pool().QueryRow(testsvc.Context(t, 30*time.Second),
				`SELECT payload IS NOT NULL FROM dlq.dlq_messages WHERE id = $1`, m.ID).Scan(&hasJSON))
			require.False(t, hasJSON, "no jsonb copy")
		}
		testsvc.Eventually(t, 30*time.Second, func() bool {
			return f.Broker.CommittedCount() == 10
		}, "committed once stored")
	})
}
