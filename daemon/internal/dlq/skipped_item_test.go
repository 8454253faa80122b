package dlq_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// TestSkippedItem: an item of a bulk retry whose message was not claimed
// is skipped, with the reason, unless this very operation sent the
// message already (an earlier owner that lost the operation while the
// broker had the page): then it counts as what the broker said.
func TestSkippedItem(t *testing.T) {
	op, other := uuid.New(), uuid.New()
	it := dlq.OperationItem{Seq: 7, ID: uuid.New()}
	msg := func(status dlq.Status, retries int, attempts ...dlq.Attempt) *dlq.Message {
		return &dlq.Message{ID: it.ID, Status: status, RetryCount: retries, MaxRetries: 3, OriginalTopic: "orders.events.v1",
			Payload: []byte("{}"), Attempts: attempts}
	}
	by := func(id uuid.UUID, outcome, err string) dlq.Attempt {
		return dlq.Attempt{Outcome: outcome, Error: err, Trigger: dlq.TriggerBulk, Operation: &id}
	}
	for _, c := range []struct {
		name string
		m    *dlq.Message
		want dlq.ItemResult
	}{
		{"gone", nil, dlq.ItemResult{Outcome: dlq.ItemSkipped, Error: dlq.ItemGone}},
		{"resolved by this operation", msg(dlq.StatusResolved, 0, by(op, dlq.OutcomeResolved, "")),
			dlq.ItemResult{Outcome: dlq.ItemRetried}},
		{"dead by this operation", msg(dlq.StatusDead, 3, by(op, dlq.OutcomeDead, "RECORD_TOO_LARGE")),
			dlq.ItemResult{Outcome: dlq.ItemRefused, Error: "RECORD_TOO_LARGE"}},
		{"resolved by another operation", msg(dlq.StatusResolved, 0, by(other, dlq.OutcomeResolved, "")),
			dlq.ItemResult{Outcome: dlq.ItemSkipped, Error: "message is not retryable: status=RESOLVED, retry_count=0/3"}},
		{"resolved by a single retry", msg(dlq.StatusResolved, 0, dlq.Attempt{Outcome: dlq.OutcomeResolved, Trigger: dlq.TriggerManual}),
			dlq.ItemResult{Outcome: dlq.ItemSkipped, Error: "message is not retryable: status=RESOLVED, retry_count=0/3"}},
		{"resolved by this operation, then returned", msg(dlq.StatusPending, 1, by(op, dlq.OutcomeResolved, ""),
			dlq.Attempt{Outcome: dlq.OutcomeReturned, Error: "failed again"}),
			dlq.ItemResult{Outcome: dlq.ItemRetried}},
		{"refused by this operation, attempts left", msg(dlq.StatusPending, 1, by(op, dlq.OutcomeFailed, "RECORD_TOO_LARGE")),
			dlq.ItemResult{Outcome: dlq.ItemRefused, Error: "RECORD_TOO_LARGE"}},
		{"this operation's source could not try: tried again", msg(dlq.StatusPending, 0, by(op, dlq.OutcomeUnavailable, "down")),
			dlq.ItemResult{Outcome: dlq.ItemSkipped, Error: "message is not retryable: status=PENDING, retry_count=0/3", UnderClaim: true}},
		{"PENDING again when read (a claim ended meanwhile): tried again", msg(dlq.StatusPending, 1, dlq.Attempt{Outcome: dlq.OutcomeFailed}),
			dlq.ItemResult{Outcome: dlq.ItemSkipped, Error: "message is not retryable: status=PENDING, retry_count=1/3", UnderClaim: true}},
		{"under another claim", msg(dlq.StatusRetrying, 1),
			dlq.ItemResult{Outcome: dlq.ItemSkipped, Error: "message is being retried: status=RETRYING, retry_count=1/3", UnderClaim: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.want.Seq, c.want.ID = it.Seq, it.ID
			require.Equal(t, c.want, dlq.SkippedItem(it, c.m, op))
		})
	}
}
