package bulk_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/bulk"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/dlqtest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// TestBulkRetryActsOnTheSetFixedAtTheStart: a bulk retry by topic
// republishes exactly the messages matched when it started, once each;
// a message arriving later, and every message of another topic, is left
// as it was.
func TestBulkRetryActsOnTheSetFixedAtTheStart(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, time.Minute)
		target := f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "timeout after 30s", 0, 30)
		other := f.IngestTo(t, "billing.dlq.v1", "billing.events.v1", "timeout after 30s", 0, 10)
		before := f.Checksums(t)
		uid := uint32(1001)
		op, err := f.Ops.StartOperation(ctx, bulk.Request{Action: dlq.ActionRetry,
			Filter: dlq.OperationFilter{Search: dlq.SearchFilter{Topic: "orders.dlq.v1", Statuses: []dlq.Status{dlq.StatusPending}}}, UID: &uid})
		require.NoError(t, err)
		require.EqualValues(t, 30, op.Matched)
		require.Equal(t, dlq.OperationRunning, op.State)
		late := f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "timeout after 30s", 100, 5)
		lateSums := f.Checksums(t)

		dlqtest.StartRunner(t, f.Ops)
		done := dlqtest.WaitOperation(t, f.Ops, op.ID, dlqtest.Finished, "completed")
		require.Equal(t, dlq.OperationCompleted, done.State)
		require.EqualValues(t, 30, done.Done)
		require.EqualValues(t, 30, done.Succeeded)
		require.EqualValues(t, 0, done.Failed)
		require.Equal(t, map[string]int64{dlq.ItemRetried: 30}, done.Outcomes)
		require.NotNil(t, done.FinishedAt)

		counts := dlqtest.RepublishCounts(f.Broker)
		require.Len(t, counts, 30)
		for _, id := range target {
			require.Equal(t, 1, counts[id.String()], "republished once")
			m := f.Get(t, id)
			require.Equal(t, dlq.StatusResolved, m.Status)
			last := m.Attempts[len(m.Attempts)-1]
			require.Equal(t, dlq.TriggerBulk, last.Trigger)
			require.Equal(t, op.ID, *last.Operation, "the history names the operation")
			require.Equal(t, uid, *last.UID)
		}
		after := f.Checksums(t)
		require.Equal(t, dlqtest.Without(before, target), dlqtest.Without(after, target, late), "other topics are untouched")
		for _, id := range late {
			require.Equal(t, lateSums[id], after[id], "a later arrival is not swept in")
		}
		_ = other
	})
}

// TestBulkDryRunChangesNothing: a dry run counts and samples, and stores
// nothing.
func TestBulkDryRunChangesNothing(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, time.Minute)
		f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", `duplicate key value violates unique constraint "orders_pkey"`, 0, 25)
		f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "connection refused", 100, 5)
		before := f.Checksums(t)
		n, sample, err := f.Ops.DryRunOperation(ctx, bulk.Request{Action: dlq.ActionDelete,
			Filter: dlq.OperationFilter{Search: dlq.SearchFilter{Error: "UNIQUE constraint"}}}, 10)
		require.NoError(t, err)
		require.EqualValues(t, 25, n)
		require.Len(t, sample, 10)
		for _, m := range sample {
			require.Contains(t, m.ErrorMessage, "unique constraint")
		}
		ops, err := f.Ops.Operations(ctx, 10, false)
		require.NoError(t, err)
		require.Empty(t, ops, "a dry run stores no operation")
		require.Equal(t, before, f.Checksums(t))
	})
}

// TestBulkCancelStopsBetweenPages: a rate-limited bulk retry cancelled
// part way ends CANCELLED; what it did is exactly what its counters say,
// and the rest of its set is untouched.
func TestBulkCancelStopsBetweenPages(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, time.Minute)
		ids := f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 60)
		before := f.Checksums(t)
		// At 15/s the 60 take 4 s: the cancel, about a second in, has
		// seconds of margin when a loaded machine delays the wait's polls
		// (at 40/s it had about one, and the test failed under load).
		op, err := f.Ops.StartOperation(ctx, bulk.Request{Action: dlq.ActionRetry, Rate: 15,
			Filter: dlq.OperationFilter{Search: dlq.SearchFilter{Topic: "orders.dlq.v1"}}})
		require.NoError(t, err)
		dlqtest.StartRunner(t, f.Ops)
		dlqtest.WaitOperation(t, f.Ops, op.ID, func(o *dlq.Operation) bool { return o.Done >= 16 }, "some done")
		uid := uint32(7)
		_, err = f.Ops.CancelOperation(ctx, op.ID, &uid)
		require.NoError(t, err)
		done := dlqtest.WaitOperation(t, f.Ops, op.ID, dlqtest.Finished, "cancelled")
		require.Equal(t, dlq.OperationCancelled, done.State)
		require.Less(t, done.Done, int64(60), "stopped before the end")
		require.Equal(t, uid, *done.CancelledByUID)

		counts := dlqtest.RepublishCounts(f.Broker)
		require.EqualValues(t, done.Succeeded, len(counts), "the counters say what was republished")
		var untouched []uuid.UUID
		for _, id := range ids {
			if counts[id.String()] == 0 {
				untouched = append(untouched, id)
			} else {
				require.Equal(t, dlq.StatusResolved, f.Get(t, id).Status)
			}
		}
		after := f.Checksums(t)
		for _, id := range untouched {
			require.Equal(t, before[id], after[id], "not reached: untouched")
		}
		time.Sleep(200 * time.Millisecond)
		require.Len(t, dlqtest.RepublishCounts(f.Broker), len(counts), "nothing after the cancel")

		_, err = f.Ops.CancelOperation(ctx, op.ID, &uid)
		require.ErrorIs(t, err, derrors.ErrConflict, "an operation that is over cannot be cancelled")
	})
}

// TestBulkOperationResumesOnAnotherDaemon: a daemon stopping in the middle
// of an operation hands it back; another one resumes it after the last
// page recorded, and every message is republished exactly once.
func TestBulkOperationResumesOnAnotherDaemon(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, time.Minute)
		ids := f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 80)
		// 20/s: the 80 take four seconds, so the stop after the first 20
		// comes well before the end (at 100/s it could come after it).
		op, err := f.Ops.StartOperation(ctx, bulk.Request{Action: dlq.ActionRetry, Rate: 20,
			Filter: dlq.OperationFilter{Search: dlq.SearchFilter{Topic: "orders.dlq.v1"}}})
		require.NoError(t, err)
		first := dlqtest.StartRunner(t, f.Ops)
		dlqtest.WaitOperation(t, f.Ops, op.ID, func(o *dlq.Operation) bool { return o.Done >= 20 }, "some done")
		require.NoError(t, first.Stop(ctx))
		mid, err := f.Ops.Operation(ctx, op.ID)
		require.NoError(t, err)
		require.Equal(t, dlq.OperationRunning, mid.State, "a stop is not an end")
		require.Less(t, mid.Done, int64(80))

		_, otherOps := f.Daemon(t, "daemon-b", f.Store, dlqtest.Sources{B: f.Broker})
		dlqtest.StartRunner(t, otherOps)
		done := dlqtest.WaitOperation(t, otherOps, op.ID, dlqtest.Finished, "completed")
		require.Equal(t, dlq.OperationCompleted, done.State)
		require.EqualValues(t, 80, done.Done)
		require.EqualValues(t, 80, done.Succeeded)
		counts := dlqtest.RepublishCounts(f.Broker)
		for _, id := range ids {
			require.Equal(t, 1, counts[id.String()], "exactly once")
		}
	})
}

// TestBulkDeadReviveDelete: dead, revive and delete act on their set
// only, skip (and say why) a message not in a state they apply to, and
// record the operation in each message's history.
func TestBulkDeadReviveDelete(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, time.Minute)
		set := f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "schema mismatch", 0, 12)
		bystanders := f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "timeout", 100, 6)
		// One of the set is RESOLVED already: dead skips it.
		_, err := f.Svc.Retry(ctx, set[0])
		require.NoError(t, err)
		before := f.Checksums(t)
		dlqtest.StartRunner(t, f.Ops)
		uid := uint32(1001)
		run := func(action dlq.OperationAction) *dlq.Operation {
			op, err := f.Ops.StartOperation(ctx, bulk.Request{Action: action, UID: &uid,
				Filter: dlq.OperationFilter{Search: dlq.SearchFilter{Error: "schema mismatch"}}})
			require.NoError(t, err)
			return dlqtest.WaitOperation(t, f.Ops, op.ID, dlqtest.Finished, string(action))
		}

		dead := run(dlq.ActionDead)
		require.Equal(t, dlq.OperationCompleted, dead.State)
		require.Equal(t, map[string]int64{dlq.ItemMarkedDead: 11, dlq.ItemSkipped: 1}, dead.Outcomes)
		failures, err := f.Ops.OperationFailures(ctx, dead.ID, 10)
		require.NoError(t, err)
		require.Len(t, failures, 1)
		require.Equal(t, set[0], failures[0].ID)
		require.Contains(t, failures[0].Error, "status=RESOLVED")
		for _, id := range set[1:] {
			require.Equal(t, dlq.StatusDead, f.Get(t, id).Status)
			h := f.History(t, id)
			last := h[len(h)-1]
			require.Equal(t, dlq.KindMarkedDead, last.Kind)
			require.Equal(t, uid, *last.UID)
			require.Contains(t, string(last.Detail), dead.ID.String())
		}

		revived := run(dlq.ActionRevive)
		require.Equal(t, map[string]int64{dlq.ItemRevived: 11, dlq.ItemSkipped: 1}, revived.Outcomes)
		for _, id := range set[1:] {
			m := f.Get(t, id)
			require.Equal(t, dlq.StatusPending, m.Status)
			require.Equal(t, revived.ID, *m.Attempts[len(m.Attempts)-1].Operation)
		}

		deleted := run(dlq.ActionDelete)
		require.Equal(t, map[string]int64{dlq.ItemDeleted: 12}, deleted.Outcomes)
		for _, id := range set {
			_, err := f.Svc.Get(ctx, id)
			require.ErrorIs(t, err, derrors.ErrNotFound)
			h := f.History(t, id)
			require.Equal(t, dlq.KindDeleted, h[len(h)-1].Kind)
			require.Contains(t, string(h[len(h)-1].Detail), deleted.ID.String())
		}
		after := f.Checksums(t)
		for _, id := range bystanders {
			require.Equal(t, before[id], after[id], "a bystander is untouched")
		}
		require.Len(t, after, len(bystanders))
	})
}

// TestBulkReplayToAnotherTopic: replay_to sends each message unchanged to
// the target topic and keeps the stored record as it was, with the replay
// (and its operation) in the history.
func TestBulkReplayToAnotherTopic(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, time.Minute)
		ids := f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 7)
		before := f.Checksums(t)
		dlqtest.StartRunner(t, f.Ops)
		uid := uint32(1001)
		op, err := f.Ops.StartOperation(ctx, bulk.Request{Action: dlq.ActionReplayTo, TargetTopic: "orders.audit.v1", UID: &uid,
			Filter: dlq.OperationFilter{IDs: ids[:5]}})
		require.NoError(t, err)
		require.EqualValues(t, 5, op.Matched)
		done := dlqtest.WaitOperation(t, f.Ops, op.ID, dlqtest.Finished, "completed")
		require.Equal(t, map[string]int64{dlq.ItemReplayed: 5}, done.Outcomes)
		sent := f.Broker.Sent()
		require.Len(t, sent, 5)
		for _, m := range sent {
			require.Equal(t, "orders.audit.v1", m.Topic)
		}
		require.Equal(t, before, f.Checksums(t), "the stored records do not change")
		h := f.History(t, ids[0])
		require.Equal(t, dlq.KindReplayed, h[len(h)-1].Kind)
		require.Contains(t, string(h[len(h)-1].Detail), op.ID.String())

		_, err = f.Ops.StartOperation(ctx, bulk.Request{Action: dlq.ActionReplayTo, Filter: dlq.OperationFilter{IDs: ids}})
		require.ErrorIs(t, err, derrors.ErrInvalid, "replay_to needs a target")
		_, err = f.Ops.StartOperation(ctx, bulk.Request{Action: dlq.ActionRetry, Rate: -1, Filter: dlq.OperationFilter{IDs: ids}})
		require.ErrorIs(t, err, derrors.ErrInvalid)
		ops, err := f.Ops.Operations(ctx, 10, false)
		require.NoError(t, err)
		require.Len(t, ops, 1, "a refused request stores nothing")
	})
}

// TestBulkRetryStopsForABrokerOutage: when no source can send (the broker
// is down), a bulk retry does not run through its set counting every
// message unavailable: it stops with the page it could not send back to
// PENDING (nothing counted against it) and resumes from its last recorded
// page once its lease ran out, sending each message once.
func TestBulkRetryStopsForABrokerOutage(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, time.Minute)
		ids := f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 40)
		dlqtest.StartRunner(t, f.Ops)
		op, err := f.Ops.StartOperation(ctx, bulk.Request{Action: dlq.ActionRetry, Rate: 40,
			Filter: dlq.OperationFilter{Search: dlq.SearchFilter{Topic: "orders.dlq.v1"}}})
		require.NoError(t, err)
		dlqtest.WaitOperation(t, f.Ops, op.ID, func(o *dlq.Operation) bool { return o.Done >= 8 }, "some done")
		f.Broker.Set(func(b *dlqtest.Broker) { b.Down = errors.New("connection refused") })
		time.Sleep(time.Second)
		mid, err := f.Ops.Operation(ctx, op.ID)
		require.NoError(t, err)
		require.Equal(t, dlq.OperationRunning, mid.State, "an outage is not the end of the operation")
		require.Zero(t, mid.Failed, "nothing counted as failed: %v", mid.Outcomes)
		require.Less(t, mid.Done, int64(40))
		for _, id := range ids {
			m := f.Get(t, id)
			require.NotEqual(t, dlq.StatusRetrying, m.Status, "no message is left claimed")
			require.Zero(t, m.RetryCount, "an outage counts no attempt")
		}

		f.Broker.Set(func(b *dlqtest.Broker) { b.Down = nil })
		f.Clock.Set(dlqtest.T0.Add(time.Minute)) // the lease has run out
		done := dlqtest.WaitOperation(t, f.Ops, op.ID, dlqtest.Finished, "completed")
		require.Equal(t, dlq.OperationCompleted, done.State)
		require.Equal(t, map[string]int64{dlq.ItemRetried: 40}, done.Outcomes)
		counts := dlqtest.RepublishCounts(f.Broker)
		for _, id := range ids {
			require.Equal(t, 1, counts[id.String()], "sent once")
		}
	})
}

// TestBulkReplayToADLQTopicIsRefused: replay_to a topic dead letters are
// taken in from would only bring them back as new dead letters; it is
// refused before anything is stored, as a single replay is.
func TestBulkReplayToADLQTopicIsRefused(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, time.Minute)
		ids := f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 3)
		f.IngestTo(t, "billing.dead", "billing.events.v1", "boom", 0, 1)
		before := f.Checksums(t)
		for _, target := range []string{"orders.dlq.v1", "billing.dead"} {
			req := bulk.Request{Action: dlq.ActionReplayTo, TargetTopic: target, Filter: dlq.OperationFilter{IDs: ids}}
			_, err := f.Ops.StartOperation(ctx, req)
			require.ErrorIs(t, err, derrors.ErrInvalid, target)
			_, _, err = f.Ops.DryRunOperation(ctx, req, 5)
			require.ErrorIs(t, err, derrors.ErrInvalid, target)
		}
		ops, err := f.Ops.Operations(ctx, 10, false)
		require.NoError(t, err)
		require.Empty(t, ops)
		require.Equal(t, before, f.Checksums(t))
		require.Empty(t, dlqtest.RepublishCounts(f.Broker))
	})
}

// TestBulkRetryResumesAroundPagesRecordedOutOfOrder: pages of a bulk
// retry are recorded as their brokers answer, so a daemon can stop with a
// page recorded beyond a gap. The daemon that resumes the operation does
// the gap and what follows, and skips the page recorded already: each
// message is republished once, each item counted once.
func TestBulkRetryResumesAroundPagesRecordedOutOfOrder(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, time.Minute)
		ids := f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 80)
		bystanders := f.IngestTo(t, "payments.dlq.v1", "payments.events.v1", "boom", 0, 5)
		now := f.Clock.Now()
		until := now.Add(time.Minute)
		op, err := f.Store.CreateDLQOperation(ctx, dlq.Operation{ID: uuid.New(), Action: dlq.ActionRetry, State: dlq.OperationRunning,
			Filter: []byte("{}"), CreatedAt: now, UpdatedAt: now, LeaseOwner: "daemon-x", LeaseExpiresAt: &until},
			dlq.OperationFilter{Search: dlq.SearchFilter{Topic: "orders.dlq.v1"}})
		require.NoError(t, err)
		// daemon-x recorded items 41..60 (its broker acknowledged them)
		// and stopped before the pages ahead of them were recorded.
		ahead, err := f.Store.DLQOperationItems(ctx, op.ID, 40, 20)
		require.NoError(t, err)
		require.Len(t, ahead, 20)
		var doneAhead []uuid.UUID
		_, err = f.Store.RetryDLQPage(ctx, dlq.RetryPage{
			Claim: dlq.Claim{Owner: "daemon-x", Now: now, LeaseUntil: until},
			Items: ahead,
			Now:   f.Clock.Now,
			Send: func(claimed []dlq.Message, _ []dlq.ItemResult) ([]dlq.Outcome, func([]dlq.Recorded) *dlq.OperationProgress) {
				outcomes := make([]dlq.Outcome, len(claimed))
				results := make([]dlq.ItemResult, len(claimed))
				for i, m := range claimed {
					outcomes[i] = dlq.Finish(m, dlq.EventAcked)
					outcomes[i].At, outcomes[i].Attempted = now, true
					results[i] = dlq.ItemResult{Seq: ahead[i].Seq, ID: m.ID, Outcome: dlq.ItemRetried}
					doneAhead = append(doneAhead, m.ID)
				}
				return outcomes, func([]dlq.Recorded) *dlq.OperationProgress {
					return &dlq.OperationProgress{Operation: op.ID, Owner: "daemon-x", Now: now, After: 40, Position: 60, Results: results}
				}
			},
		})
		require.NoError(t, err)
		require.Len(t, doneAhead, 20)
		mid, err := f.Ops.Operation(ctx, op.ID)
		require.NoError(t, err)
		require.EqualValues(t, 0, mid.Position)
		require.Equal(t, []dlq.SeqRange{{After: 40, Upto: 60}}, mid.DoneRanges)
		require.NoError(t, f.Store.ReleaseDLQOperation(ctx, op.ID, "daemon-x"))
		before := f.Checksums(t)

		dlqtest.StartRunner(t, f.Ops)
		done := dlqtest.WaitOperation(t, f.Ops, op.ID, dlqtest.Finished, "completed")
		require.Equal(t, dlq.OperationCompleted, done.State)
		require.EqualValues(t, 80, done.Done, "each item counted once")
		require.EqualValues(t, 80, done.Succeeded)
		require.Equal(t, map[string]int64{dlq.ItemRetried: 80}, done.Outcomes)
		require.EqualValues(t, 80, done.Position)
		require.Empty(t, done.DoneRanges)
		counts := dlqtest.RepublishCounts(f.Broker)
		recordedAhead := map[uuid.UUID]bool{}
		for _, id := range doneAhead {
			recordedAhead[id] = true
		}
		for _, id := range ids {
			want := 1
			if recordedAhead[id] {
				want = 0 // recorded by daemon-x, not sent again
			}
			require.Equal(t, want, counts[id.String()], "message %s", id)
			require.Equal(t, dlq.StatusResolved, f.Get(t, id).Status)
		}
		require.Equal(t, dlqtest.Without(before, ids), dlqtest.Without(f.Checksums(t), ids), "the payments messages are untouched")
		for _, id := range bystanders {
			require.Zero(t, counts[id.String()])
		}
	})
}
