package bulk_test

import (
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/bulk"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/dlqtest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

func TestRetryAllCountsEveryOutcomeAcrossPages(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		ids := f.Ingest(t, 250)
		refused := map[string]bool{ids[7].String(): true, ids[120].String(): true, ids[249].String(): true}
		f.Broker.Set(func(b *dlqtest.Broker) {
			for id := range refused {
				b.Refuse[id] = sdk.Permanent(errors.New("INVALID_RECORD"))
			}
		})
		retryable := func(topic string) int64 {
			n, err := f.Svc.CountRetryable(ctx, topic)
			require.NoError(t, err)
			return n
		}
		require.EqualValues(t, 250, retryable("orders.dlq.v1"), "dry run by DLQ topic")
		require.EqualValues(t, 250, retryable("orders.events.v1"), "dry run by original topic")
		require.EqualValues(t, 0, retryable("payments.dlq.v1"))
		require.Empty(t, f.Broker.RepublishedIDs(), "a dry run republishes nothing")
		require.Equal(t, dlq.StatusPending, f.Get(t, ids[0]).Status, "and claims nothing")

		res, err := f.Ops.RetryAll(ctx, "orders.dlq.v1")
		require.NoError(t, err)
		require.Equal(t, bulk.RetryAllResult{Retried: 247, Failed: 3}, res)
		require.EqualValues(t, 3, retryable("orders.dlq.v1"), "the refused ones are still retryable")

		sent := f.Broker.RepublishedIDs()
		require.Len(t, sent, 247)
		sort.Strings(sent)
		for i := 1; i < len(sent); i++ {
			require.NotEqual(t, sent[i-1], sent[i], "each message republished once")
		}
		for _, id := range ids {
			m := f.Get(t, id)
			if refused[id.String()] {
				require.Equal(t, dlq.StatusPending, m.Status)
				require.Equal(t, 1, m.RetryCount)
			} else {
				require.Equal(t, dlq.StatusResolved, m.Status)
			}
		}

		// Second pass: only the three refused ones are retryable.
		f.Broker.Set(func(b *dlqtest.Broker) { b.Refuse = map[string]error{} })
		res, err = f.Ops.RetryAll(ctx, "orders.dlq.v1")
		require.NoError(t, err)
		require.Equal(t, bulk.RetryAllResult{Retried: 3}, res)
		require.EqualValues(t, 0, retryable("orders.dlq.v1"))
	})
}

func TestRetryAllWithTheBrokerDownLeavesEveryMessagePending(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		ids := f.Ingest(t, 150)
		f.Broker.Set(func(b *dlqtest.Broker) { b.Down = sdk.Unavailable(errors.New("all brokers down")) })
		res, err := f.Ops.RetryAll(ctx, "orders.dlq.v1")
		require.ErrorIs(t, err, derrors.ErrUnavailable)
		require.Equal(t, bulk.RetryAllResult{Unavailable: 150}, res)
		for _, id := range ids {
			m := f.Get(t, id)
			require.Equal(t, dlq.StatusPending, m.Status)
			require.Zero(t, m.RetryCount)
		}
	})
}
