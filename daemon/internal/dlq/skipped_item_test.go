package dlq_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// TestSkippedItem: an item of a bulk retry whose message was not claimed
// is skipped, with the reason, unless the message could be retried but for
// a claim (held, or ended a moment ago): then it is tried again.
func TestSkippedItem(t *testing.T) {
	it := dlq.OperationItem{Seq: 7, ID: uuid.New()}
	msg := func(status dlq.Status, retries int) *dlq.Message {
		return &dlq.Message{ID: it.ID, Status: status, RetryCount: retries, MaxRetries: 3, OriginalTopic: "orders.events.v1",
			Payload: []byte("{}")}
	}
	for _, c := range []struct {
		name string
		m    *dlq.Message
		want dlq.ItemResult
	}{
		{"gone", nil, dlq.ItemResult{Outcome: dlq.ItemSkipped, Error: dlq.ItemGone}},
		{"resolved", msg(dlq.StatusResolved, 0),
			dlq.ItemResult{Outcome: dlq.ItemSkipped, Error: "message is not retryable: status=RESOLVED, retry_count=0/3"}},
		{"dead", msg(dlq.StatusDead, 3),
			dlq.ItemResult{Outcome: dlq.ItemSkipped, Error: "message is not retryable: status=DEAD, retry_count=3/3"}},
		{"under another claim", msg(dlq.StatusRetrying, 1),
			dlq.ItemResult{Outcome: dlq.ItemSkipped, Error: "message is being retried: status=RETRYING, retry_count=1/3", UnderClaim: true}},
		{"PENDING again when read (a claim ended meanwhile)", msg(dlq.StatusPending, 1),
			dlq.ItemResult{Outcome: dlq.ItemSkipped, Error: "message is not retryable: status=PENDING, retry_count=1/3", UnderClaim: true}},
		{"RETRYING on its last attempt's claim, no attempts left", msg(dlq.StatusRetrying, 3),
			dlq.ItemResult{Outcome: dlq.ItemSkipped, Error: "message is not retryable: status=RETRYING, retry_count=3/3"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.want.Seq, c.want.ID = it.Seq, it.ID
			require.Equal(t, c.want, dlq.SkippedItem(it, c.m))
		})
	}
}

// TestAnswered: the item outcomes that are the broker's answer to a send,
// kept for a page whose operation was lost.
func TestAnswered(t *testing.T) {
	for outcome, want := range map[string]bool{
		dlq.ItemRetried: true, dlq.ItemRefused: true, dlq.ItemNotRecorded: false,
		dlq.ItemUnavailable: false, dlq.ItemSkipped: false, dlq.ItemFailed: false,
		dlq.ItemRevived: false, dlq.ItemDeleted: false, dlq.ItemMarkedDead: false, dlq.ItemReplayed: false,
	} {
		require.Equal(t, want, dlq.Answered(outcome), outcome)
	}
}
