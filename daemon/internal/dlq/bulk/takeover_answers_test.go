package bulk_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/bulk"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/dlqtest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

// TestATakeoverDoesNotResendAMessageThatCameBack: A's page resolved a
// message (recorded without the progress); the replay failed again and came
// back (PENDING, one attempt counted) before B reached the page. The
// operation sent it once: B counts it and does not send it again.
func TestATakeoverDoesNotResendAMessageThatCameBack(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, 2*time.Minute)
		ids := f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 5)
		bb := dlqtest.NewBroker()
		g := newGated(f.Store)
		b := newPeer(t, f, g, bb, "daemon-b")
		t.Cleanup(g.open) // first: B's runner's Stop waits for B's page at the gate
		stall := stallA(t, f)
		dlqtest.StartRunner(t, f.Ops)
		t.Cleanup(stall.let) // first: the runners' Stop waits for A's pages
		op := retryOrders(t, ctx, f.Ops, 0)
		<-stall.started
		require.NoError(t, b.runner.Start(ctx))
		takeOver(t, f, b, op.ID)
		stall.let()
		waitFor(t, 30*time.Second, "A's page recorded", func() bool { return f.Get(t, ids[0]).Status == dlq.StatusResolved })
		id := ids[0]
		in := dlq.Incoming{Position: dlq.LogPosition("kafka", "orders.dlq.v1", 0, 50), OriginalTopic: "orders.events.v1",
			ErrorMessage: "failed again", Payload: []byte(`{"n":0}`), FeedbackOf: &id}
		res, err := f.Store.IngestDLQ(ctx, []dlq.Incoming{in}, dlq.IngestOptions{Now: f.Clock.Now(), MaxRetries: 3})
		require.NoError(t, err)
		require.Equal(t, 1, res.Feedback)
		require.Equal(t, dlq.StatusPending, f.Get(t, id).Status)
		g.open()
		done := dlqtest.WaitOperation(t, f.Ops, op.ID, dlqtest.Finished, "dlqtest.Finished")
		counts := sends(f.Broker, bb)
		t.Logf("outcomes %v done %d; sends of the returned message: A %d, B %d", done.Outcomes, done.Done,
			dlqtest.RepublishCounts(f.Broker)[id.String()], dlqtest.RepublishCounts(bb)[id.String()])
		require.Equal(t, dlq.OperationCompleted, done.State)
		require.Equal(t, 1, counts[id.String()], "the operation sent the message once")
	})
}

// TestATakeoverRemembersPastTheHistoryCap: A's page is refused for two
// messages (attempts left) and acknowledged for the others, recorded
// without the progress (B took the operation over); then each refused
// message gets 50 more attempts (single retries) before B reaches the
// page, which pushes A's attempt out of their history (the newest 50 are
// kept). B does not send them again, and counts them as refused. When the
// history was what said the operation had sent a message, B sent it again
// and counted one as retried and the other as skipped.
func TestATakeoverRemembersPastTheHistoryCap(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, 2*time.Minute)
		f.Policy.MaxRetries = 100
		ids := f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 4)
		f.Policy.MaxRetries = 51
		m2 := f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 10, 1)[0]
		f.Policy.MaxRetries = 3
		others := f.IngestTo(t, "billing.dlq.v1", "billing.events.v1", "boom", 100, 3)
		before := f.Checksums(t)
		m1 := ids[3]
		refuse := sdk.Permanent(fmt.Errorf("consumer rejects it"))
		f.Broker.Set(func(b *dlqtest.Broker) { b.Refuse[m1.String()] = refuse; b.Refuse[m2.String()] = refuse })
		bb := dlqtest.NewBroker()
		g := newGated(f.Store)
		b := newPeer(t, f, g, bb, "daemon-b")
		t.Cleanup(g.open) // first: B's runner's Stop waits for B's page at the gate
		stall := stallA(t, f)
		dlqtest.StartRunner(t, f.Ops)
		t.Cleanup(stall.let)
		op := retryOrders(t, ctx, f.Ops, 0)
		require.EqualValues(t, 5, op.Matched)
		<-stall.started
		require.NoError(t, b.runner.Start(ctx))
		takeOver(t, f, b, op.ID)
		stall.let()
		waitFor(t, 30*time.Second, "A's page recorded", func() bool {
			return f.Get(t, m1).RetryCount == 1 && f.Get(t, m2).RetryCount == 1 && f.Get(t, ids[0]).Status == dlq.StatusResolved
		})
		require.Equal(t, 1, answeredBy(f.Get(t, m1), op.ID))
		f.Broker.Set(func(b *dlqtest.Broker) { b.During = nil })
		for i := 0; i < 50; i++ {
			for _, id := range []uuid.UUID{m1, m2} {
				_, err := f.Svc.Retry(ctx, id)
				require.ErrorIs(t, err, dlq.ErrRepublishFailed)
			}
		}
		require.Equal(t, dlq.StatusPending, f.Get(t, m1).Status)
		require.Equal(t, dlq.StatusDead, f.Get(t, m2).Status)
		require.Zero(t, answeredBy(f.Get(t, m1), op.ID), "the history no longer holds the operation's attempt")
		g.open()
		done := dlqtest.WaitOperation(t, f.Ops, op.ID, dlqtest.Finished, "dlqtest.Finished")
		require.Equal(t, dlq.OperationCompleted, done.State)
		require.Zero(t, dlqtest.RepublishCounts(bb)[m1.String()], "the operation gave m1 one answered attempt (A's refusal)")
		require.Equal(t, map[string]int64{dlq.ItemRetried: 3, dlq.ItemRefused: 2}, done.Outcomes)
		require.EqualValues(t, 5, done.Done)
		require.Equal(t, 51, f.Get(t, m1).RetryCount, "one attempt of the operation and 50 single retries")
		f.RequireUntouched(t, before, others)
	})
}

// TestARunThatLostItsLeaseHandsBackWhatItsRunnerTookBack: daemon A's run
// loses its lease to B while A's page is at the broker; B hands the
// operation back (B stopped) and A's runner takes it again before A's run
// has ended. That run ends on the lost lease with pages left, and A's runner starts no
// second run beside it: the operation stayed RUNNING under A's lease with
// no run, until that lease ran out. The clock stands still here, so only
// a hand-back ends it.
func TestARunThatLostItsLeaseHandsBackWhatItsRunnerTookBack(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, 2*time.Minute)
		// Pages of 5: more pages than the run has under way, so it has
		// pages left to read when it stops.
		ids := f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 40)
		stall := stallA(t, f)
		f.Ops.CapPages(5)
		others := f.IngestTo(t, "billing.dlq.v1", "billing.events.v1", "boom", 100, 3)
		before := f.Checksums(t)
		a := startA(t, f)
		t.Cleanup(stall.let)
		op := retryOrders(t, ctx, f.Ops, 0)
		<-stall.started
		// B takes the operation (its lease ran out by the clock) ...
		waitFor(t, 30*time.Second, "daemon-b took the operation", func() bool {
			f.Clock.Set(f.Clock.Now().Add(5 * time.Second))
			now := f.Clock.Now()
			o, err := f.Store.ClaimDLQOperation(ctx, "daemon-b", now, now.Add(2*time.Second))
			require.NoError(t, err)
			return o != nil
		})
		a.sig.LeaseLost.WaitFor(t, "A's run saw the lease lost", func(id uuid.UUID) bool { return id == op.ID })
		// ... and hands it back; A's runner takes it again.
		a.sig.Polled.Drain() // A's first claim of it
		require.NoError(t, f.Store.ReleaseDLQOperation(ctx, op.ID, "daemon-b"))
		a.sig.Polled.WaitFor(t, "A's runner took it back", func(p bulk.Poll) bool { return p.Claimed == op.ID })
		stall.let()
		done := dlqtest.WaitOperation(t, f.Ops, op.ID, dlqtest.Finished, "dlqtest.Finished without the clock")
		require.Equal(t, dlq.OperationCompleted, done.State)
		require.EqualValues(t, 40, done.Done)
		require.Equal(t, map[string]int64{dlq.ItemRetried: 40}, done.Outcomes)
		counts := dlqtest.RepublishCounts(f.Broker)
		for _, id := range ids {
			require.Equal(t, dlq.StatusResolved, f.Get(t, id).Status)
			require.Equal(t, 1, counts[id.String()], "sent once")
		}
		f.RequireUntouched(t, before, others)
	})
}
