package dlq_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

// ingestTo stores n dead letters of dlqTopic failed with errText, at
// offsets from base, and returns their ids.
func (f *fixture) ingestTo(t *testing.T, dlqTopic, original, errText string, base, n int) []uuid.UUID {
	t.Helper()
	ctx := testsvc.Context(t, 30*time.Second)
	batch := make([]dlq.Incoming, n)
	for i := range batch {
		batch[i] = dlq.Incoming{
			Position:      dlq.Position{Source: "kafka", Topic: dlqTopic, Offset: int64(base + i)},
			OriginalTopic: original, ErrorMessage: errText,
			Key: []byte(fmt.Sprintf("k%d", base+i)), Payload: []byte(fmt.Sprintf(`{"n":%d}`, base+i)),
		}
	}
	_, err := f.store.IngestDLQ(ctx, batch, dlq.IngestOptions{Now: f.clock.now(), MaxRetries: f.policy.MaxRetries})
	require.NoError(t, err)
	page, err := f.store.SearchDLQ(ctx, dlq.SearchFilter{Topic: dlqTopic, Limit: 1000, OldestFirst: true})
	require.NoError(t, err)
	var ids []uuid.UUID
	for _, m := range page.Messages {
		if m.Position.Offset >= int64(base) && m.Position.Offset < int64(base+n) {
			ids = append(ids, m.ID)
		}
	}
	require.Len(t, ids, n)
	return ids
}

// requireUntouched checks that the messages ids are as they were in
// before (checksums taken earlier): the bystanders of what a test did.
func (f *fixture) requireUntouched(t *testing.T, before map[uuid.UUID]string, ids []uuid.UUID) {
	t.Helper()
	after := f.checksums(t)
	for _, id := range ids {
		require.Equal(t, before[id], after[id], "message %s is a bystander: it must not change", id)
	}
}

// checksums is every stored message (live and archived) by id, as a digest
// of everything an operation could change.
func (f *fixture) checksums(t *testing.T) map[uuid.UUID]string {
	t.Helper()
	page, err := f.store.SearchDLQ(testsvc.Context(t, 30*time.Second), dlq.SearchFilter{Limit: 1000, IncludeArchived: true})
	require.NoError(t, err)
	require.Nil(t, page.Next, "the fixture fits one page")
	out := map[uuid.UUID]string{}
	for _, m := range page.Messages {
		b, err := json.Marshal(struct {
			S                         dlq.Status
			C, M                      int
			K, P                      []byte
			H                         []dlq.Header
			E, L                      string
			A                         []dlq.Attempt
			Next                      *time.Time
			Archived                  bool
			OriginalTopic, Source, DT string
		}{m.Status, m.RetryCount, m.MaxRetries, m.Key, m.Payload, m.Headers, m.ErrorMessage, m.LastError, m.Attempts, m.NextRetryAt,
			m.Archived, m.OriginalTopic, m.Position.Source, m.Position.Topic})
		require.NoError(t, err)
		out[m.ID] = fmt.Sprintf("%x", sha256.Sum256(b))
	}
	return out
}

// without is sums without the ids.
func without(sums map[uuid.UUID]string, ids ...[]uuid.UUID) map[uuid.UUID]string {
	out := map[uuid.UUID]string{}
	for k, v := range sums {
		out[k] = v
	}
	for _, l := range ids {
		for _, id := range l {
			delete(out, id)
		}
	}
	return out
}

// runner starts an operation runner of svc for the test.
func startRunner(t *testing.T, svc *dlq.Service) *dlq.OperationRunner {
	t.Helper()
	r := dlq.NewOperationRunner(svc, func() dlq.OperationConfig {
		return dlq.OperationConfig{PollInterval: 20 * time.Millisecond, Lease: 2 * time.Second, MaxRunning: 2}
	})
	require.NoError(t, r.Start(testsvc.Context(t, time.Minute)))
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	return r
}

// waitOperation waits up to a minute: on SQLite under the race detector a
// page of a few hundred outcomes takes seconds, and CI runs packages side
// by side on two cores. A wait that ends without cond says where the
// operation stood (its state, progress and lease).
func waitOperation(t *testing.T, svc *dlq.Service, id uuid.UUID, cond func(*dlq.Operation) bool, what string) *dlq.Operation {
	t.Helper()
	var op *dlq.Operation
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		var err error
		op, err = svc.Operation(testsvc.Context(t, 30*time.Second), id)
		require.NoError(t, err)
		if cond(op) {
			return op
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within a minute: %s; the operation: state %s, done %d of %d, outcomes %v, lease %q until %s, position %d, done ranges %v",
				what, op.State, op.Done, op.Matched, op.Outcomes, op.LeaseOwner, fmtTime(op.LeaseExpiresAt), op.Position, op.DoneRanges)
		}
	}
}

func finished(op *dlq.Operation) bool { return op.Finished() }

func republishCounts(b *broker) map[string]int {
	out := map[string]int{}
	for _, id := range b.republishedIDs() {
		out[id]++
	}
	return out
}

// TestBulkRetryActsOnTheSetFixedAtTheStart: a bulk retry by topic
// republishes exactly the messages matched when it started, once each;
// a message arriving later, and every message of another topic, is left
// as it was.
func TestBulkRetryActsOnTheSetFixedAtTheStart(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, time.Minute)
		target := f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "timeout after 30s", 0, 30)
		other := f.ingestTo(t, "billing.dlq.v1", "billing.events.v1", "timeout after 30s", 0, 10)
		before := f.checksums(t)
		uid := uint32(1001)
		op, err := f.svc.StartOperation(ctx, dlq.OperationRequest{Action: dlq.ActionRetry,
			Filter: dlq.OperationFilter{Search: dlq.SearchFilter{Topic: "orders.dlq.v1", Statuses: []dlq.Status{dlq.StatusPending}}}, UID: &uid})
		require.NoError(t, err)
		require.EqualValues(t, 30, op.Matched)
		require.Equal(t, dlq.OperationRunning, op.State)
		late := f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "timeout after 30s", 100, 5)
		lateSums := f.checksums(t)

		startRunner(t, f.svc)
		done := waitOperation(t, f.svc, op.ID, finished, "completed")
		require.Equal(t, dlq.OperationCompleted, done.State)
		require.EqualValues(t, 30, done.Done)
		require.EqualValues(t, 30, done.Succeeded)
		require.EqualValues(t, 0, done.Failed)
		require.Equal(t, map[string]int64{dlq.ItemRetried: 30}, done.Outcomes)
		require.NotNil(t, done.FinishedAt)

		counts := republishCounts(f.broker)
		require.Len(t, counts, 30)
		for _, id := range target {
			require.Equal(t, 1, counts[id.String()], "republished once")
			m := f.get(t, id)
			require.Equal(t, dlq.StatusResolved, m.Status)
			last := m.Attempts[len(m.Attempts)-1]
			require.Equal(t, dlq.TriggerBulk, last.Trigger)
			require.Equal(t, op.ID, *last.Operation, "the history names the operation")
			require.Equal(t, uid, *last.UID)
		}
		after := f.checksums(t)
		require.Equal(t, without(before, target), without(after, target, late), "other topics are untouched")
		for _, id := range late {
			require.Equal(t, lateSums[id], after[id], "a later arrival is not swept in")
		}
		_ = other
	})
}

// TestBulkDryRunChangesNothing: a dry run counts and samples, and stores
// nothing.
func TestBulkDryRunChangesNothing(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, time.Minute)
		f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", `duplicate key value violates unique constraint "orders_pkey"`, 0, 25)
		f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "connection refused", 100, 5)
		before := f.checksums(t)
		n, sample, err := f.svc.DryRunOperation(ctx, dlq.OperationRequest{Action: dlq.ActionDelete,
			Filter: dlq.OperationFilter{Search: dlq.SearchFilter{Error: "UNIQUE constraint"}}}, 10)
		require.NoError(t, err)
		require.EqualValues(t, 25, n)
		require.Len(t, sample, 10)
		for _, m := range sample {
			require.Contains(t, m.ErrorMessage, "unique constraint")
		}
		ops, err := f.svc.Operations(ctx, 10, false)
		require.NoError(t, err)
		require.Empty(t, ops, "a dry run stores no operation")
		require.Equal(t, before, f.checksums(t))
	})
}

// TestBulkCancelStopsBetweenPages: a rate-limited bulk retry cancelled
// part way ends CANCELLED; what it did is exactly what its counters say,
// and the rest of its set is untouched.
func TestBulkCancelStopsBetweenPages(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, time.Minute)
		ids := f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 60)
		before := f.checksums(t)
		op, err := f.svc.StartOperation(ctx, dlq.OperationRequest{Action: dlq.ActionRetry, Rate: 40,
			Filter: dlq.OperationFilter{Search: dlq.SearchFilter{Topic: "orders.dlq.v1"}}})
		require.NoError(t, err)
		startRunner(t, f.svc)
		waitOperation(t, f.svc, op.ID, func(o *dlq.Operation) bool { return o.Done >= 16 }, "some done")
		uid := uint32(7)
		_, err = f.svc.CancelOperation(ctx, op.ID, &uid)
		require.NoError(t, err)
		done := waitOperation(t, f.svc, op.ID, finished, "cancelled")
		require.Equal(t, dlq.OperationCancelled, done.State)
		require.Less(t, done.Done, int64(60), "stopped before the end")
		require.Equal(t, uid, *done.CancelledByUID)

		counts := republishCounts(f.broker)
		require.EqualValues(t, done.Succeeded, len(counts), "the counters say what was republished")
		var untouched []uuid.UUID
		for _, id := range ids {
			if counts[id.String()] == 0 {
				untouched = append(untouched, id)
			} else {
				require.Equal(t, dlq.StatusResolved, f.get(t, id).Status)
			}
		}
		after := f.checksums(t)
		for _, id := range untouched {
			require.Equal(t, before[id], after[id], "not reached: untouched")
		}
		time.Sleep(200 * time.Millisecond)
		require.Len(t, republishCounts(f.broker), len(counts), "nothing after the cancel")

		_, err = f.svc.CancelOperation(ctx, op.ID, &uid)
		require.ErrorIs(t, err, derrors.ErrConflict, "an operation that is over cannot be cancelled")
	})
}

// TestBulkOperationResumesOnAnotherDaemon: a daemon stopping in the middle
// of an operation hands it back; another one resumes it after the last
// page recorded, and every message is republished exactly once.
func TestBulkOperationResumesOnAnotherDaemon(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, time.Minute)
		ids := f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 80)
		// 20/s: the 80 take four seconds, so the stop after the first 20
		// comes well before the end (at 100/s it could come after it).
		op, err := f.svc.StartOperation(ctx, dlq.OperationRequest{Action: dlq.ActionRetry, Rate: 20,
			Filter: dlq.OperationFilter{Search: dlq.SearchFilter{Topic: "orders.dlq.v1"}}})
		require.NoError(t, err)
		first := startRunner(t, f.svc)
		waitOperation(t, f.svc, op.ID, func(o *dlq.Operation) bool { return o.Done >= 20 }, "some done")
		require.NoError(t, first.Stop(ctx))
		mid, err := f.svc.Operation(ctx, op.ID)
		require.NoError(t, err)
		require.Equal(t, dlq.OperationRunning, mid.State, "a stop is not an end")
		require.Less(t, mid.Done, int64(80))

		other := dlq.NewService(f.store, sources{f.broker}, func() dlq.Policy { return f.policy }, "daemon-b", daemonLog(t, "daemon-b"),
			dlq.NewMetrics(nil, f.store, nil, periodic.New(nil)))
		dlq.SetClock(other, nil, f.clock.now)
		startRunner(t, other)
		done := waitOperation(t, other, op.ID, finished, "completed")
		require.Equal(t, dlq.OperationCompleted, done.State)
		require.EqualValues(t, 80, done.Done)
		require.EqualValues(t, 80, done.Succeeded)
		counts := republishCounts(f.broker)
		for _, id := range ids {
			require.Equal(t, 1, counts[id.String()], "exactly once")
		}
	})
}

// lingeringRenewals is a store whose operation lease renewals, like a
// driver slow to give up, return only a while after their context ended.
type lingeringRenewals struct {
	dlq.Store
	testsvc.Lingering
}

func (s *lingeringRenewals) RenewDLQOperationLease(ctx context.Context, _ uuid.UUID, _ string, _ time.Time) error {
	return s.Call(ctx)
}

// TestAStoppedRunnerLeavesNoStoreCallBehind: when the runner's Stop
// returns, nothing of its runs is still at the store (the heartbeat's
// renewal included): the daemon closes the store right after, and a call
// under way then wrote into a closed SQLite database's directory.
func TestAStoppedRunnerLeavesNoStoreCallBehind(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, time.Minute)
		st := &lingeringRenewals{Store: f.store}
		svc, runner, op := startSlowRetry(t, ctx, f, st)
		testsvc.Eventually(t, 30*time.Second, func() bool { return st.Started.Load() > 0 }, "a renewal under way")
		require.NoError(t, runner.Stop(ctx))
		require.Zero(t, st.UnderWay.Load(), "a lease renewal still at the store after Stop returned")
		mid, err := svc.Operation(ctx, op.ID)
		require.NoError(t, err)
		require.Equal(t, dlq.OperationRunning, mid.State)
		require.Empty(t, mid.LeaseOwner, "handed back")
	})
}

// lateClaims is a store whose operation claims, once late is set, reach
// the database a while after they were made: a claim whose caller gave up
// (its context ended) still happens, as a statement already sent does on
// a busy server.
type lateClaims struct {
	dlq.Store
	late atomic.Bool
}

func (s *lateClaims) ClaimDLQOperation(ctx context.Context, owner string, now, until time.Time) (*dlq.Operation, error) {
	if !s.late.Load() {
		return s.Store.ClaimDLQOperation(ctx, owner, now, until)
	}
	return testsvc.Late(ctx, 300*time.Millisecond, func(ctx context.Context) (*dlq.Operation, error) {
		return s.Store.ClaimDLQOperation(ctx, owner, now, until)
	})
}

// TestAClaimUnderWayWhenTheRunnerStopsIsNotLeftHeld: the runner looks for
// more operations while it runs one; a stop that cut such a claim short
// (the claim went on at the database after the stop handed the running
// operation back) left the operation held by the stopped daemon, RUNNING
// with no run until that lease ran out (CI saw it as a takeover test that
// never took over).
func TestAClaimUnderWayWhenTheRunnerStopsIsNotLeftHeld(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, time.Minute)
		st := &lateClaims{Store: f.store}
		svc, runner, op := startSlowRetry(t, ctx, f, st)
		waitOperation(t, svc, op.ID, func(o *dlq.Operation) bool { return o.Done >= 1 }, "running")
		st.late.Store(true)
		time.Sleep(400 * time.Millisecond) // a claim is under way now, always
		require.NoError(t, runner.Stop(ctx))
		time.Sleep(500 * time.Millisecond) // a claim cut short would have happened by now
		mid, err := svc.Operation(ctx, op.ID)
		require.NoError(t, err)
		require.Equal(t, dlq.OperationRunning, mid.State)
		require.Empty(t, mid.LeaseOwner, "handed back, and not claimed again by the stopped runner")
	})
}

// startSlowRetry stores 40 dead letters and starts daemon-a on st (f's
// store, wrapped) with a bulk retry of them at 5/s (eight seconds) and its
// runner; it returns the daemon, the runner and the operation.
func startSlowRetry(t *testing.T, ctx context.Context, f *fixture, st dlq.Store) (*dlq.Service, *dlq.OperationRunner, *dlq.Operation) {
	t.Helper()
	f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 40)
	svc, runner := daemon(t, f, st, f.broker, "daemon-a")
	op, err := svc.StartOperation(ctx, dlq.OperationRequest{Action: dlq.ActionRetry, Rate: 5,
		Filter: dlq.OperationFilter{Search: dlq.SearchFilter{Topic: "orders.dlq.v1"}}})
	require.NoError(t, err)
	require.NoError(t, runner.Start(ctx))
	return svc, runner, op
}

// TestBulkDeadReviveDelete: dead, revive and delete act on their set
// only, skip (and say why) a message not in a state they apply to, and
// record the operation in each message's history.
func TestBulkDeadReviveDelete(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, time.Minute)
		set := f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "schema mismatch", 0, 12)
		bystanders := f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "timeout", 100, 6)
		// One of the set is RESOLVED already: dead skips it.
		_, err := f.svc.Retry(ctx, set[0])
		require.NoError(t, err)
		before := f.checksums(t)
		startRunner(t, f.svc)
		uid := uint32(1001)
		run := func(action dlq.OperationAction) *dlq.Operation {
			op, err := f.svc.StartOperation(ctx, dlq.OperationRequest{Action: action, UID: &uid,
				Filter: dlq.OperationFilter{Search: dlq.SearchFilter{Error: "schema mismatch"}}})
			require.NoError(t, err)
			return waitOperation(t, f.svc, op.ID, finished, string(action))
		}

		dead := run(dlq.ActionDead)
		require.Equal(t, dlq.OperationCompleted, dead.State)
		require.Equal(t, map[string]int64{dlq.ItemMarkedDead: 11, dlq.ItemSkipped: 1}, dead.Outcomes)
		failures, err := f.svc.OperationFailures(ctx, dead.ID, 10)
		require.NoError(t, err)
		require.Len(t, failures, 1)
		require.Equal(t, set[0], failures[0].ID)
		require.Contains(t, failures[0].Error, "status=RESOLVED")
		for _, id := range set[1:] {
			require.Equal(t, dlq.StatusDead, f.get(t, id).Status)
			h := f.history(t, id)
			last := h[len(h)-1]
			require.Equal(t, dlq.KindMarkedDead, last.Kind)
			require.Equal(t, uid, *last.UID)
			require.Contains(t, string(last.Detail), dead.ID.String())
		}

		revived := run(dlq.ActionRevive)
		require.Equal(t, map[string]int64{dlq.ItemRevived: 11, dlq.ItemSkipped: 1}, revived.Outcomes)
		for _, id := range set[1:] {
			m := f.get(t, id)
			require.Equal(t, dlq.StatusPending, m.Status)
			require.Equal(t, revived.ID, *m.Attempts[len(m.Attempts)-1].Operation)
		}

		deleted := run(dlq.ActionDelete)
		require.Equal(t, map[string]int64{dlq.ItemDeleted: 12}, deleted.Outcomes)
		for _, id := range set {
			_, err := f.svc.Get(ctx, id)
			require.ErrorIs(t, err, derrors.ErrNotFound)
			h := f.history(t, id)
			require.Equal(t, dlq.KindDeleted, h[len(h)-1].Kind)
			require.Contains(t, string(h[len(h)-1].Detail), deleted.ID.String())
		}
		after := f.checksums(t)
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
	each(t, false, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, time.Minute)
		ids := f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 7)
		before := f.checksums(t)
		startRunner(t, f.svc)
		uid := uint32(1001)
		op, err := f.svc.StartOperation(ctx, dlq.OperationRequest{Action: dlq.ActionReplayTo, TargetTopic: "orders.audit.v1", UID: &uid,
			Filter: dlq.OperationFilter{IDs: ids[:5]}})
		require.NoError(t, err)
		require.EqualValues(t, 5, op.Matched)
		done := waitOperation(t, f.svc, op.ID, finished, "completed")
		require.Equal(t, map[string]int64{dlq.ItemReplayed: 5}, done.Outcomes)
		f.broker.mu.Lock()
		sent := append([]sdk.RepublishMessage(nil), f.broker.republished...)
		f.broker.mu.Unlock()
		require.Len(t, sent, 5)
		for _, m := range sent {
			require.Equal(t, "orders.audit.v1", m.Topic)
		}
		require.Equal(t, before, f.checksums(t), "the stored records do not change")
		h := f.history(t, ids[0])
		require.Equal(t, dlq.KindReplayed, h[len(h)-1].Kind)
		require.Contains(t, string(h[len(h)-1].Detail), op.ID.String())

		_, err = f.svc.StartOperation(ctx, dlq.OperationRequest{Action: dlq.ActionReplayTo, Filter: dlq.OperationFilter{IDs: ids}})
		require.ErrorIs(t, err, derrors.ErrInvalid, "replay_to needs a target")
		_, err = f.svc.StartOperation(ctx, dlq.OperationRequest{Action: dlq.ActionRetry, Rate: -1, Filter: dlq.OperationFilter{IDs: ids}})
		require.ErrorIs(t, err, derrors.ErrInvalid)
		ops, err := f.svc.Operations(ctx, 10, false)
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
	each(t, false, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, time.Minute)
		ids := f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 40)
		startRunner(t, f.svc)
		op, err := f.svc.StartOperation(ctx, dlq.OperationRequest{Action: dlq.ActionRetry, Rate: 40,
			Filter: dlq.OperationFilter{Search: dlq.SearchFilter{Topic: "orders.dlq.v1"}}})
		require.NoError(t, err)
		waitOperation(t, f.svc, op.ID, func(o *dlq.Operation) bool { return o.Done >= 8 }, "some done")
		f.broker.set(func(b *broker) { b.down = errors.New("connection refused") })
		time.Sleep(time.Second)
		mid, err := f.svc.Operation(ctx, op.ID)
		require.NoError(t, err)
		require.Equal(t, dlq.OperationRunning, mid.State, "an outage is not the end of the operation")
		require.Zero(t, mid.Failed, "nothing counted as failed: %v", mid.Outcomes)
		require.Less(t, mid.Done, int64(40))
		for _, id := range ids {
			m := f.get(t, id)
			require.NotEqual(t, dlq.StatusRetrying, m.Status, "no message is left claimed")
			require.Zero(t, m.RetryCount, "an outage counts no attempt")
		}

		f.broker.set(func(b *broker) { b.down = nil })
		f.clock.set(t0.Add(time.Minute)) // the lease has run out
		done := waitOperation(t, f.svc, op.ID, finished, "completed")
		require.Equal(t, dlq.OperationCompleted, done.State)
		require.Equal(t, map[string]int64{dlq.ItemRetried: 40}, done.Outcomes)
		counts := republishCounts(f.broker)
		for _, id := range ids {
			require.Equal(t, 1, counts[id.String()], "sent once")
		}
	})
}

// TestBulkReplayToADLQTopicIsRefused: replay_to a topic dead letters are
// taken in from would only bring them back as new dead letters; it is
// refused before anything is stored, as a single replay is.
func TestBulkReplayToADLQTopicIsRefused(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, time.Minute)
		ids := f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 3)
		f.ingestTo(t, "billing.dead", "billing.events.v1", "boom", 0, 1)
		before := f.checksums(t)
		for _, target := range []string{"orders.dlq.v1", "billing.dead"} {
			req := dlq.OperationRequest{Action: dlq.ActionReplayTo, TargetTopic: target, Filter: dlq.OperationFilter{IDs: ids}}
			_, err := f.svc.StartOperation(ctx, req)
			require.ErrorIs(t, err, derrors.ErrInvalid, target)
			_, _, err = f.svc.DryRunOperation(ctx, req, 5)
			require.ErrorIs(t, err, derrors.ErrInvalid, target)
		}
		ops, err := f.svc.Operations(ctx, 10, false)
		require.NoError(t, err)
		require.Empty(t, ops)
		require.Equal(t, before, f.checksums(t))
		require.Empty(t, republishCounts(f.broker))
	})
}

// TestBulkRetryResumesAroundPagesRecordedOutOfOrder: pages of a bulk
// retry are recorded as their brokers answer, so a daemon can stop with a
// page recorded beyond a gap. The daemon that resumes the operation does
// the gap and what follows, and skips the page recorded already: each
// message is republished once, each item counted once.
func TestBulkRetryResumesAroundPagesRecordedOutOfOrder(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, time.Minute)
		ids := f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 80)
		bystanders := f.ingestTo(t, "payments.dlq.v1", "payments.events.v1", "boom", 0, 5)
		now := f.clock.now()
		until := now.Add(time.Minute)
		op, err := f.store.CreateDLQOperation(ctx, dlq.Operation{ID: uuid.New(), Action: dlq.ActionRetry, State: dlq.OperationRunning,
			Filter: []byte("{}"), CreatedAt: now, UpdatedAt: now, LeaseOwner: "daemon-x", LeaseExpiresAt: &until},
			dlq.OperationFilter{Search: dlq.SearchFilter{Topic: "orders.dlq.v1"}})
		require.NoError(t, err)
		// daemon-x recorded items 41..60 (its broker acknowledged them)
		// and stopped before the pages ahead of them were recorded.
		ahead, err := f.store.DLQOperationItems(ctx, op.ID, 40, 20)
		require.NoError(t, err)
		require.Len(t, ahead, 20)
		var doneAhead []uuid.UUID
		_, err = f.store.RetryDLQPage(ctx, dlq.RetryPage{
			Claim: dlq.Claim{Owner: "daemon-x", Now: now, LeaseUntil: until},
			Items: ahead,
			Now:   f.clock.now,
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
		mid, err := f.svc.Operation(ctx, op.ID)
		require.NoError(t, err)
		require.EqualValues(t, 0, mid.Position)
		require.Equal(t, []dlq.SeqRange{{After: 40, Upto: 60}}, mid.DoneRanges)
		require.NoError(t, f.store.ReleaseDLQOperation(ctx, op.ID, "daemon-x"))
		before := f.checksums(t)

		startRunner(t, f.svc)
		done := waitOperation(t, f.svc, op.ID, finished, "completed")
		require.Equal(t, dlq.OperationCompleted, done.State)
		require.EqualValues(t, 80, done.Done, "each item counted once")
		require.EqualValues(t, 80, done.Succeeded)
		require.Equal(t, map[string]int64{dlq.ItemRetried: 80}, done.Outcomes)
		require.EqualValues(t, 80, done.Position)
		require.Empty(t, done.DoneRanges)
		counts := republishCounts(f.broker)
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
			require.Equal(t, dlq.StatusResolved, f.get(t, id).Status)
		}
		require.Equal(t, without(before, ids), without(f.checksums(t), ids), "the payments messages are untouched")
		for _, id := range bystanders {
			require.Zero(t, counts[id.String()])
		}
	})
}
