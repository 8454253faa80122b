package dlq_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/bulk"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/dlqtest"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// slowBroker makes f's broker hold every send while the clock passes the
// 30 s lease twice over, a renewal at a time (when leased: a page of a
// bulk retry on PostgreSQL holds row locks instead), and the release of
// expired leases runs; what went wrong is sent on the returned channel
// (the send may run on another goroutine).
func slowBroker(t *testing.T, f *dlqtest.Fixture, leased bool) <-chan error {
	renewed := make(chan struct{}, 64)
	f.Reconfigure(t, dlq.WithClaimHeartbeat(5*time.Millisecond, func() {
		select {
		case renewed <- struct{}{}:
		default:
		}
	}))
	errs := make(chan error, 16)
	f.Broker.Set(func(b *dlqtest.Broker) {
		b.During = func() {
			for step := 0; step < 3; step++ {
				f.Clock.Set(f.Clock.Now().Add(20 * time.Second))
				// Two renewals after the clock moved: one at least read
				// the new time. Without renewals the release below decides.
				for n := 0; leased && n < 2; n++ {
					select {
					case <-renewed:
					case <-time.After(5 * time.Second):
					}
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if n, err := f.Store.ReleaseExpiredDLQLeases(ctx, f.Clock.Now(), dlq.Sending{}); err != nil || n != 0 {
				errs <- errors.Join(err, errors.New("the release of expired leases took messages under a renewed claim"))
			}
		}
	})
	return errs
}

func noErrors(t *testing.T, errs <-chan error) {
	t.Helper()
	select {
	case err := <-errs:
		require.NoError(t, err)
	default:
	}
}

// TestASendSlowerThanTheLeaseKeepsItsClaim: a broker that takes longer to
// answer than the lease (large messages on a loaded broker) must not lose
// the acknowledgement. The lease is renewed while the send is in flight;
// before, the release of expired leases returned the messages to PENDING,
// the acknowledgement was not recorded and the messages were sent again.
func TestASendSlowerThanTheLeaseKeepsItsClaim(t *testing.T) {
	t.Run("single", func(t *testing.T) {
		dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
			ctx := testsvc.Context(t, time.Minute)
			ids := f.Ingest(t, 3)
			others := dlqtest.Without(f.Checksums(t), ids[:1])
			errs := slowBroker(t, f, true)
			m, err := f.Svc.Retry(ctx, ids[0])
			require.NoError(t, err)
			require.Equal(t, dlq.StatusResolved, m.Status)
			noErrors(t, errs)
			require.Equal(t, dlq.StatusResolved, f.Get(t, ids[0]).Status)
			require.Equal(t, others, dlqtest.Without(f.Checksums(t), ids[:1]), "the other messages did not change")
		})
	})
	t.Run("auto", func(t *testing.T) {
		dlqtest.Each(t, true, func(t *testing.T, f *dlqtest.Fixture) {
			ctx := testsvc.Context(t, time.Minute)
			ids := f.Ingest(t, 4)
			errs := slowBroker(t, f, true)
			f.Clock.Set(dlqtest.T0.Add(2 * time.Minute)) // every message is due
			loop := dlq.NewRetryLoop(f.Svc, func() time.Duration { return time.Hour })
			require.NoError(t, loop.RunOnce(ctx))
			noErrors(t, errs)
			for _, id := range ids {
				m := f.Get(t, id)
				require.Equal(t, dlq.StatusResolved, m.Status, "%s", id)
			}
			require.Equal(t, map[string]int{ids[0].String(): 1, ids[1].String(): 1, ids[2].String(): 1, ids[3].String(): 1},
				dlqtest.RepublishCounts(f.Broker), "each sent once")
		})
	})
	t.Run("bulk", func(t *testing.T) {
		dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
			ctx := testsvc.Context(t, time.Minute)
			ids := f.IngestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 5)
			others := f.IngestTo(t, "billing.dlq.v1", "billing.events.v1", "boom", 100, 3)
			before := f.Checksums(t)
			_, rowLocks := f.Store.(*store.Postgres)
			errs := slowBroker(t, f, !rowLocks)
			dlqtest.StartRunner(t, f.Ops)
			op, err := f.Ops.StartOperation(ctx, bulk.Request{Action: dlq.ActionRetry,
				Filter: dlq.OperationFilter{Search: dlq.SearchFilter{Topic: "orders.dlq.v1"}}})
			require.NoError(t, err)
			done := dlqtest.WaitOperation(t, f.Ops, op.ID, dlqtest.Finished, "completed")
			noErrors(t, errs)
			require.Equal(t, map[string]int64{dlq.ItemRetried: 5}, done.Outcomes)
			counts := dlqtest.RepublishCounts(f.Broker)
			for _, id := range ids {
				require.Equal(t, dlq.StatusResolved, f.Get(t, id).Status)
				require.Equal(t, 1, counts[id.String()], "sent once")
			}
			f.RequireUntouched(t, before, others)
		})
	})
}

// slowRecord is a state store whose recording of send outcomes (FinishDLQ)
// runs before first, as a write that waited behind others would: the
// outcome of a send is recorded after its lease ran out.
type slowRecord struct {
	dlq.Store
	before func()
}

func (s *slowRecord) FinishDLQ(ctx context.Context, owner string, now time.Time, outcomes []dlq.Outcome) ([]dlq.Recorded, error) {
	if before := s.before; before != nil {
		s.before = nil
		before()
	}
	return s.Store.FinishDLQ(ctx, owner, now, outcomes)
}

// Found by the contention test in one CI run on a loaded machine (attempt
// 1 of many messages sent twice): the claim of a sent message stopped
// counting as "being sent" once the broker answered, before its outcome
// was recorded. When that recording waited past the lease, this same
// daemon's retry loop released the expired lease and sent the message a
// second time. A message counts as being sent until its outcome is
// recorded.
func TestAnOutcomeRecordedAfterTheLeaseIsNotSentAgain(t *testing.T) {
	dlqtest.Each(t, true, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, time.Minute)
		ids := f.Ingest(t, 2)
		st := &slowRecord{Store: f.Store}
		svc, _ := f.Daemon(t, "daemon-a", st, f.Sources)
		loop := dlq.NewRetryLoop(svc, func() time.Duration { return time.Hour })
		st.before = func() {
			// The lease (30 s) is over, and every message is due: the loop
			// releases expired leases and retries what is due.
			f.Clock.Set(f.Clock.Now().Add(2 * time.Minute))
			require.NoError(t, loop.RunOnce(ctx))
		}
		m, err := svc.Retry(ctx, ids[0])
		require.NoError(t, err)
		require.Equal(t, dlq.StatusResolved, m.Status)
		require.Equal(t, map[string]int{ids[0].String(): 1, ids[1].String(): 1}, dlqtest.RepublishCounts(f.Broker),
			"each sent once: the one being recorded was not taken by the loop")
		require.Equal(t, dlq.StatusResolved, f.Get(t, ids[1]).Status)
	})
}

// stalledRecord is a state store whose first recording of send outcomes
// waits until its context ends (a lock held past the recording's budget),
// as if the store were down; later ones go through.
type stalledRecord struct {
	dlq.Store
	mu      sync.Mutex
	stalled bool
}

func (s *stalledRecord) FinishDLQ(ctx context.Context, owner string, now time.Time, outcomes []dlq.Outcome) ([]dlq.Recorded, error) {
	s.mu.Lock()
	first := !s.stalled
	s.stalled = true
	s.mu.Unlock()
	if first {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.Store.FinishDLQ(ctx, owner, now, outcomes)
}

// Found by an outside review: a recording that failed (it waited past its
// 30 s budget) ended the hold, and once the lease ran out this daemon's
// retry loop sent the acknowledged message again. The hold now lasts
// while the recording is tried again in the background: the message is
// sent once, and RESOLVED once the store answers.
func TestAnOutcomeWhoseRecordingFailedIsNotSentAgain(t *testing.T) {
	dlqtest.Each(t, true, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, time.Minute)
		ids := f.Ingest(t, 1)
		st := &stalledRecord{Store: f.Store}
		svc, _ := f.Daemon(t, "daemon-a", st, f.Sources, dlq.WithRecordTimeout(200*time.Millisecond))
		_, err := svc.Retry(ctx, ids[0])
		require.Error(t, err, "the recording failed")
		f.Clock.Set(f.Clock.Now().Add(2 * time.Minute)) // the lease is over, the message due
		require.NoError(t, dlq.NewRetryLoop(svc, func() time.Duration { return time.Hour }).RunOnce(ctx))
		require.Equal(t, map[string]int{ids[0].String(): 1}, dlqtest.RepublishCounts(f.Broker), "sent once")
		require.Eventually(t, func() bool { return f.Get(t, ids[0]).Status == dlq.StatusResolved }, 30*time.Second, 50*time.Millisecond,
			"recorded once the store answered")
		require.Equal(t, map[string]int{ids[0].String(): 1}, dlqtest.RepublishCounts(f.Broker), "and still sent once")
	})
}
