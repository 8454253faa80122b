package bulk_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/bulk"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/dlqtest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

// TestBulkRetryWaitsForMessagesUnderAnotherClaim: a message RETRYING
// under another claim when its page comes (the retry loop's, or one left
// by a daemon that died mid-page) is tried again once that claim ended.
// It was counted as skipped ("being retried"), and never retried by the
// operation when the claim was a dead daemon's.
func TestBulkRetryWaitsForMessagesUnderAnotherClaim(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, time.Minute)
		ids := f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 6)
		others := f.IngestTo(t, "billing.dlq.v1", "billing.events.v1", "boom", 100, 3)
		// A daemon that died after claiming two of them.
		for _, id := range ids[:2] {
			_, err := f.Store.ClaimDLQ(ctx, id, dlq.Claim{Owner: "daemon-dead", Now: dlqtest.T0, LeaseUntil: dlqtest.T0.Add(30 * time.Second)})
			require.NoError(t, err)
		}
		before := f.Checksums(t)
		dlqtest.StartRunner(t, f.Ops)
		op, err := f.Ops.StartOperation(ctx, bulk.Request{Action: dlq.ActionRetry,
			Filter: dlq.OperationFilter{Search: dlq.SearchFilter{Topic: "orders.dlq.v1"}}})
		require.NoError(t, err)
		dlqtest.WaitOperation(t, f.Ops, op.ID, func(o *dlq.Operation) bool { return o.Done >= 4 }, "the free ones done")
		time.Sleep(300 * time.Millisecond)
		mid, err := f.Ops.Operation(ctx, op.ID)
		require.NoError(t, err)
		require.Equal(t, dlq.OperationRunning, mid.State, "the claimed ones are still to do")
		require.Equal(t, map[string]int64{dlq.ItemRetried: 4}, mid.Outcomes)
		for _, id := range ids[:2] {
			require.Equal(t, dlq.StatusRetrying, f.Get(t, id).Status)
		}

		f.Clock.Set(dlqtest.T0.Add(time.Minute)) // the dead daemon's lease ran out
		done := dlqtest.WaitOperation(t, f.Ops, op.ID, dlqtest.Finished, "completed")
		require.Equal(t, dlq.OperationCompleted, done.State)
		require.Equal(t, map[string]int64{dlq.ItemRetried: 6}, done.Outcomes)
		counts := dlqtest.RepublishCounts(f.Broker)
		for _, id := range ids {
			require.Equal(t, dlq.StatusResolved, f.Get(t, id).Status)
			require.Equal(t, 1, counts[id.String()], "sent once")
		}
		f.RequireUntouched(t, before, others)
	})
}

// twoSources is the plugin host's view of two sources, "kafka" and
// "kafka-b", each with its broker.
type twoSources struct{ a, b *dlqtest.Broker }

func (s twoSources) SourceNames() []string { return []string{"kafka", "kafka-b"} }
func (s twoSources) Source(name string) (sdk.DLQSource, error) {
	switch name {
	case "kafka":
		return s.a, nil
	case "kafka-b":
		return s.b, nil
	}
	return nil, derrors.ErrNotFound
}
func (s twoSources) Running(name string) bool { return name == "kafka" || name == "kafka-b" }

// TestBulkRetryCountsWhatOneSourceSentWhenAnotherIsDown: a page with the
// messages of two sources, one down. What the source that is up sent is
// counted as retried at once; the other source's messages are left for
// the resumed run. The page was not counted, and the resumed run counted
// the messages already RESOLVED as skipped.
func TestBulkRetryCountsWhatOneSourceSentWhenAnotherIsDown(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, time.Minute)
		b := dlqtest.NewBroker()
		b.Down = errors.New("connection refused")
		_, ops := f.Daemon(t, "daemon-a", f.Store, twoSources{f.Broker, b})
		batch := make([]dlq.Incoming, 10)
		for i := range batch {
			src := "kafka"
			if i%2 == 1 {
				src = "kafka-b"
			}
			batch[i] = dlq.Incoming{Position: dlq.LogPosition(src, "orders.dlq.v1", 0, int64(i)),
				OriginalTopic: "orders.events.v1", ErrorMessage: "boom", Payload: []byte(fmt.Sprintf(`{"n":%d}`, i))}
		}
		_, err := f.Store.IngestDLQ(ctx, batch, dlq.IngestOptions{Now: f.Clock.Now(), MaxRetries: f.Policy.MaxRetries})
		require.NoError(t, err)
		page, err := f.Store.SearchDLQ(ctx, dlq.SearchFilter{Topic: "orders.dlq.v1", Limit: 100})
		require.NoError(t, err)
		require.Len(t, page.Messages, 10)
		var onA, onB []uuid.UUID
		for _, m := range page.Messages {
			if m.Position.Source == "kafka" {
				onA = append(onA, m.ID)
			} else {
				onB = append(onB, m.ID)
			}
		}

		dlqtest.StartRunner(t, ops)
		op, err := ops.StartOperation(ctx, bulk.Request{Action: dlq.ActionRetry,
			Filter: dlq.OperationFilter{Search: dlq.SearchFilter{Topic: "orders.dlq.v1"}}})
		require.NoError(t, err)
		mid := dlqtest.WaitOperation(t, ops, op.ID, func(o *dlq.Operation) bool { return o.Done >= 5 }, "the up source's messages counted")
		time.Sleep(300 * time.Millisecond)
		mid, err = ops.Operation(ctx, op.ID)
		require.NoError(t, err)
		require.Equal(t, dlq.OperationRunning, mid.State, "an outage is not the end of the operation")
		require.Equal(t, map[string]int64{dlq.ItemRetried: 5}, mid.Outcomes)
		for _, id := range onB {
			m := f.Get(t, id)
			require.Equal(t, dlq.StatusPending, m.Status)
			require.Zero(t, m.RetryCount, "an outage counts no attempt")
		}

		b.Set(func(b *dlqtest.Broker) { b.Down = nil })
		f.Clock.Set(dlqtest.T0.Add(time.Minute)) // the operation's lease ran out
		done := dlqtest.WaitOperation(t, ops, op.ID, dlqtest.Finished, "completed")
		require.Equal(t, dlq.OperationCompleted, done.State)
		require.Equal(t, map[string]int64{dlq.ItemRetried: 10}, done.Outcomes)
		for _, ids := range [][]uuid.UUID{onA, onB} {
			br := f.Broker
			if len(ids) > 0 && ids[0] == onB[0] {
				br = b
			}
			counts := dlqtest.RepublishCounts(br)
			for _, id := range ids {
				require.Equal(t, dlq.StatusResolved, f.Get(t, id).Status)
				require.Equal(t, 1, counts[id.String()], "sent once, by its own source")
			}
		}
	})
}

func (twoSources) Traits(string) sdk.SourceTraits { return sdk.Protocol2Traits }
