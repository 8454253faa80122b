package dlq_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/dlqtest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// A message stored before its DLQ topic's replay targets were narrowed (or
// before there were any) still names, by a header, a topic outside them.
// Whatever asks for the retry, nothing is sent there: the attempt is
// refused and counted (DEAD after max_retries), and an operator's explicit
// replay is the way out. A topic from the source's own mapping is sent.
func TestAStoredMessageOutsideTheTargetsIsNeverSentThere(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		_, err := f.Store.IngestDLQ(ctx, []dlq.Incoming{{
			Position:      dlq.LogPosition("kafka", "orders.dlq.v1", 0, 0),
			OriginalTopic: "payments.events.v1",
			ErrorMessage:  "boom",
			Headers:       []dlq.Header{{Key: []byte("kafka_dlt-original-topic"), Value: []byte("payments.events.v1")}},
			Payload:       []byte(`{"n":0}`),
		}, {
			Position:      dlq.LogPosition("kafka", "orders.dlq.v1", 0, 1),
			OriginalTopic: "mapped.events.v1",
			ErrorMessage:  "boom",
			Payload:       []byte(`{"n":1}`),
		}}, dlq.IngestOptions{Now: f.Clock.Now(), MaxRetries: 3})
		require.NoError(t, err)
		msgs, _, err := f.Store.ListDLQ(ctx, dlq.ListFilter{Topic: "orders.dlq.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		byOffset := map[int64]dlq.Message{}
		for _, m := range msgs {
			byOffset[m.Position.Offset()] = m
		}
		outside, mapped := byOffset[0].ID, byOffset[1].ID

		for attempt := 1; attempt <= 3; attempt++ {
			_, err := f.Svc.Retry(ctx, outside)
			require.ErrorIs(t, err, dlq.ErrRepublishFailed, "attempt %d", attempt)
			require.ErrorContains(t, err, "outside the replay targets")
		}
		m := f.Get(t, outside)
		require.Equal(t, dlq.StatusDead, m.Status)
		require.Equal(t, 3, m.RetryCount)
		require.Contains(t, m.LastError, "payments.events.v1")

		_, err = f.Svc.Retry(ctx, mapped)
		require.NoError(t, err)
		require.Len(t, f.Broker.Republished, 1, "only the mapped message was sent")
		require.Equal(t, "mapped.events.v1", f.Broker.Republished[0].Topic)

		// A replay without a topic would let the header choose it.
		_, err = f.Svc.Replay(ctx, outside, dlq.ReplayRequest{}, 0)
		require.ErrorIs(t, err, derrors.ErrConflict)
		require.ErrorContains(t, err, "outside the replay targets")
		require.Len(t, f.Broker.Republished, 1)

		// The operator's explicit target goes through.
		r, err := f.Svc.Replay(ctx, outside, dlq.ReplayRequest{Topic: "orders.events.v1"}, 0)
		require.NoError(t, err)
		require.Equal(t, "orders.events.v1", r.Topic)
		require.Len(t, f.Broker.Republished, 2)
		require.Equal(t, "orders.events.v1", f.Broker.Republished[1].Topic)
	})
}
