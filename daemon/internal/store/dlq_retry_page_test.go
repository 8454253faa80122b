package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
)

// retryPageFixture is a bulk retry of the orders messages held by "d1",
// beside payments messages it must not touch.
type retryPageFixture struct {
	s          store.Store
	owner      string // the daemon sending the pages: "d1" unless set
	now        time.Time
	op         *dlq.Operation
	items      []dlq.OperationItem
	bystanders string // the payments messages as JSON, before
}

func newRetryPageFixture(t *testing.T, ctx context.Context, s store.Store, n int) *retryPageFixture {
	f := &retryPageFixture{s: s, owner: "d1", now: time.Now().UTC().Truncate(time.Microsecond)}
	var in []dlq.Incoming
	for i := 1; i <= n; i++ {
		in = append(in, incoming("orders.dlq.v1", int64(i), `{"n":1}`))
	}
	for i := 1; i <= 3; i++ {
		in = append(in, incoming("payments.dlq.v1", int64(i), `{"p":1}`))
	}
	_, err := s.IngestDLQ(ctx, in, dlq.IngestOptions{Now: f.now, MaxRetries: 3})
	require.NoError(t, err)
	f.bystanders = f.topicJSON(t, ctx, "payments.dlq.v1")
	until := f.now.Add(time.Minute)
	f.op, err = s.CreateDLQOperation(ctx, dlq.Operation{ID: uuid.New(), Action: dlq.ActionRetry, State: dlq.OperationRunning,
		Filter: []byte("{}"), CreatedAt: f.now, UpdatedAt: f.now, LeaseOwner: "d1", LeaseExpiresAt: &until},
		dlq.OperationFilter{Search: dlq.SearchFilter{Topic: "orders.dlq.v1"}})
	require.NoError(t, err)
	require.EqualValues(t, n, f.op.Matched)
	f.items, err = s.DLQOperationItems(ctx, f.op.ID, 0, n)
	require.NoError(t, err)
	require.Len(t, f.items, n)
	return f
}

// topicJSON is every message of a DLQ topic, as JSON: what must not change.
func (f *retryPageFixture) topicJSON(t *testing.T, ctx context.Context, topic string) string {
	page, err := f.s.SearchDLQ(ctx, dlq.SearchFilter{Topic: topic, Limit: 100, OldestFirst: true})
	require.NoError(t, err)
	b, err := json.Marshal(page.Messages)
	require.NoError(t, err)
	return string(b)
}

// page is a retry of items (following the item numbered after) whose
// broker answers each claimed message with answer.
func (f *retryPageFixture) page(after int64, items []dlq.OperationItem, answer func(dlq.Message) dlq.Outcome,
	seen func(claimed []dlq.Message, skipped []dlq.ItemResult)) dlq.RetryPage {
	return dlq.RetryPage{
		Operation: f.op.ID,
		Claim:     dlq.Claim{Owner: f.owner, Now: f.now.Add(time.Second), LeaseUntil: f.now.Add(time.Minute)},
		Items:     items,
		Now:       func() time.Time { return f.now.Add(2 * time.Second) },
		Send: func(claimed []dlq.Message, skipped []dlq.ItemResult) ([]dlq.Outcome, func([]dlq.Recorded) *dlq.OperationProgress) {
			if seen != nil {
				seen(claimed, skipped)
			}
			outcomes := make([]dlq.Outcome, len(claimed))
			for i, m := range claimed {
				outcomes[i] = answer(m)
				outcomes[i].At, outcomes[i].Attempted, outcomes[i].Trigger = f.now.Add(2*time.Second), true, dlq.TriggerBulk
				outcomes[i].Operation = &f.op.ID
			}
			seqOf := map[uuid.UUID]int64{}
			for _, it := range items {
				seqOf[it.ID] = it.Seq
			}
			return outcomes, func(rec []dlq.Recorded) *dlq.OperationProgress {
				p := &dlq.OperationProgress{Operation: f.op.ID, Owner: f.owner, Now: f.now, After: after, Position: items[len(items)-1].Seq}
				p.Results = append(p.Results, skipped...)
				for i, o := range outcomes {
					r := dlq.ItemResult{Seq: seqOf[o.ID], ID: o.ID, Outcome: dlq.ItemRetried}
					if o.Event != dlq.EventAcked || !rec[i].Applied {
						r.Outcome, r.Error = dlq.ItemRefused, o.Error
					}
					p.Results = append(p.Results, r)
				}
				return p
			}
		},
	}
}

func acked(m dlq.Message) dlq.Outcome { return dlq.Finish(m, dlq.EventAcked) }

// TestRetryPageSendsWhatItClaimsAndRecordsItWithTheProgress: a page sends
// its retryable messages only, says why each other one was not sent,
// records every outcome (with the claim's time, as a claim would have)
// and the page's progress, and changes no other message.
func TestRetryPageSendsWhatItClaimsAndRecordsItWithTheProgress(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		f := newRetryPageFixture(t, ctx, s, 6)
		id := func(i int) uuid.UUID { return f.items[i].ID }
		resolve(t, s, id(1), f.now)
		claimed(t, s, id(2), dlq.Claim{Owner: "another daemon", Now: f.now, LeaseUntil: f.now.Add(time.Hour)})
		require.NoError(t, s.DeleteDLQ(ctx, id(3)))

		var sent []uuid.UUID
		var skipped []dlq.ItemResult
		rec, err := s.RetryDLQPage(ctx, f.page(0, f.items, func(m dlq.Message) dlq.Outcome {
			if m.ID == id(4) {
				o := dlq.Finish(m, dlq.EventRefused)
				o.Error = "record too large"
				return o
			}
			return acked(m)
		}, func(c []dlq.Message, sk []dlq.ItemResult) {
			for _, m := range c {
				require.Equal(t, dlq.StatusRetrying, m.Status, "a claimed message is sent as claimed")
				sent = append(sent, m.ID)
			}
			skipped = sk
		}))
		require.NoError(t, err)
		require.Equal(t, []uuid.UUID{id(0), id(4), id(5)}, sent, "the retryable ones, in the page's order")
		require.Len(t, rec, 3)
		for _, r := range rec {
			require.True(t, r.Applied)
		}
		require.Len(t, skipped, 3)
		require.Contains(t, skipped[0].Error, "status=RESOLVED")
		require.Contains(t, skipped[1].Error, "being retried")
		require.Equal(t, dlq.ItemGone, skipped[2].Error)

		claimAt := f.now.Add(time.Second)
		for _, i := range []int{0, 5} {
			m, err := s.GetDLQ(ctx, id(i))
			require.NoError(t, err)
			require.Equal(t, dlq.StatusResolved, m.Status)
			require.NotNil(t, m.LastRetryAt)
			require.True(t, m.LastRetryAt.Equal(claimAt), "last_retry_at is the claim's time: %v", m.LastRetryAt)
			require.Len(t, m.Attempts, 1)
			require.Equal(t, dlq.OutcomeResolved, m.Attempts[0].Outcome)
		}
		refused, err := s.GetDLQ(ctx, id(4))
		require.NoError(t, err)
		require.Equal(t, dlq.StatusPending, refused.Status)
		require.Equal(t, 1, refused.RetryCount)
		require.Equal(t, "record too large", refused.LastError)
		held, err := s.GetDLQ(ctx, id(2))
		require.NoError(t, err)
		require.Equal(t, dlq.StatusRetrying, held.Status, "another daemon's live claim is left alone")

		op, err := s.GetDLQOperation(ctx, f.op.ID)
		require.NoError(t, err)
		require.EqualValues(t, 6, op.Position)
		require.Empty(t, op.DoneRanges)
		require.EqualValues(t, 6, op.Done)
		require.EqualValues(t, 2, op.Succeeded)
		require.Equal(t, map[string]int64{dlq.ItemRetried: 2, dlq.ItemRefused: 1, dlq.ItemSkipped: 3}, op.Outcomes)
		require.Equal(t, f.bystanders, f.topicJSON(t, ctx, "payments.dlq.v1"), "other messages are untouched")
	})
}

// TestRetryPagesAreRecordedInAnyOrder: a page recorded before the one
// ahead of it is kept beside the position, which moves over it once the
// gap is filled; a page recorded twice is refused and changes nothing.
func TestRetryPagesAreRecordedInAnyOrder(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		f := newRetryPageFixture(t, ctx, s, 4)
		_, err := s.RetryDLQPage(ctx, f.page(2, f.items[2:], acked, nil))
		require.NoError(t, err)
		op, err := s.GetDLQOperation(ctx, f.op.ID)
		require.NoError(t, err)
		require.EqualValues(t, 0, op.Position)
		require.Equal(t, []dlq.SeqRange{{After: 2, Upto: 4}}, op.DoneRanges)
		require.EqualValues(t, 2, op.Done)

		before := f.topicJSON(t, ctx, "orders.dlq.v1")
		_, err = s.RetryDLQPage(ctx, f.page(2, f.items[2:], acked, nil))
		require.ErrorIs(t, err, derrors.ErrLeaseLost, "a page is counted once")
		require.Equal(t, before, f.topicJSON(t, ctx, "orders.dlq.v1"))
		again, err := s.GetDLQOperation(ctx, f.op.ID)
		require.NoError(t, err)
		require.Equal(t, op.Done, again.Done)
		require.Equal(t, op.Outcomes, again.Outcomes)

		_, err = s.RetryDLQPage(ctx, f.page(0, f.items[:2], acked, nil))
		require.NoError(t, err)
		op, err = s.GetDLQOperation(ctx, f.op.ID)
		require.NoError(t, err)
		require.EqualValues(t, 4, op.Position)
		require.Empty(t, op.DoneRanges)
		require.EqualValues(t, 4, op.Done)
		require.Equal(t, map[string]int64{dlq.ItemRetried: 4}, op.Outcomes)
		require.Equal(t, f.bystanders, f.topicJSON(t, ctx, "payments.dlq.v1"))
	})
}

// TestRetryPageOfALostOperationKeepsItsOutcomes: when another daemon
// took the operation over while the page was with the broker, the page's
// outcomes are recorded all the same (the broker has the messages),
// without its progress. The page of the daemon that took it over counts
// what the broker said of each (retried, refused) and sends none again: a
// bulk retry gives a message one attempt.
// Before, the lost lease rolled the outcomes back: the messages stayed
// PENDING (PostgreSQL) or RETRYING (SQLite) and were sent a second time.
func TestRetryPageOfALostOperationKeepsItsOutcomes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		f := newRetryPageFixture(t, ctx, s, 3)
		require.NoError(t, s.ReleaseDLQOperation(ctx, f.op.ID, "d1"))
		_, err := s.ClaimDLQOperation(ctx, "d2", f.now, f.now.Add(time.Minute))
		require.NoError(t, err)
		refused := f.items[2].ID
		answer := func(m dlq.Message) dlq.Outcome {
			if m.ID == refused {
				o := dlq.Finish(m, dlq.EventRefused)
				o.Error = "RECORD_TOO_LARGE"
				return o
			}
			return acked(m)
		}
		sent := 0
		rec, err := s.RetryDLQPage(ctx, f.page(0, f.items, answer, func(c []dlq.Message, _ []dlq.ItemResult) { sent = len(c) }))
		require.ErrorIs(t, err, derrors.ErrLeaseLost)
		require.Equal(t, 3, sent)
		require.Len(t, rec, 3)
		for i, it := range f.items {
			require.True(t, rec[i].Applied, "outcome %d recorded", i)
			m, err := s.GetDLQ(ctx, it.ID)
			require.NoError(t, err)
			require.Len(t, m.Attempts, 1)
			require.Equal(t, f.op.ID, *m.Attempts[0].Operation)
			if it.ID == refused {
				require.Equal(t, dlq.StatusPending, m.Status)
				require.Equal(t, 1, m.RetryCount)
				continue
			}
			require.Equal(t, dlq.StatusResolved, m.Status)
		}
		op, err := s.GetDLQOperation(ctx, f.op.ID)
		require.NoError(t, err)
		require.Zero(t, op.Done, "the progress is the new owner's to record")
		require.Equal(t, "d2", op.LeaseOwner)

		f.owner = "d2"
		var claimed []uuid.UUID
		var skipped []dlq.ItemResult
		_, err = s.RetryDLQPage(ctx, f.page(0, f.items, acked, func(c []dlq.Message, sk []dlq.ItemResult) {
			for _, m := range c {
				claimed = append(claimed, m.ID)
			}
			skipped = sk
		}))
		require.NoError(t, err)
		require.Empty(t, claimed, "the operation sent each message already")
		require.Equal(t, []dlq.ItemResult{
			{Seq: f.items[0].Seq, ID: f.items[0].ID, Outcome: dlq.ItemRetried},
			{Seq: f.items[1].Seq, ID: f.items[1].ID, Outcome: dlq.ItemRetried},
			{Seq: f.items[2].Seq, ID: f.items[2].ID, Outcome: dlq.ItemRefused, Error: "RECORD_TOO_LARGE"},
		}, skipped)
		op, err = s.GetDLQOperation(ctx, f.op.ID)
		require.NoError(t, err)
		require.EqualValues(t, 3, op.Done)
		require.Equal(t, map[string]int64{dlq.ItemRetried: 2, dlq.ItemRefused: 1}, op.Outcomes)
		m, err := s.GetDLQ(ctx, refused)
		require.NoError(t, err)
		require.Equal(t, 1, m.RetryCount, "the refused message had one attempt of the operation")
		require.Equal(t, f.bystanders, f.topicJSON(t, ctx, "payments.dlq.v1"))
	})
}
