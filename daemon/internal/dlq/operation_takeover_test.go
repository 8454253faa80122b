package dlq_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// TestAnOperationTakenOverDuringASendKeepsTheAcks: daemon A loses a bulk
// retry's lease to daemon B while A's page is with the broker (A stalled
// past the lease: a long GC pause, a slow broker). The broker acknowledged
// the page, so its messages are RESOLVED and B does not send them again.
// Before, A's acknowledged outcomes were recorded with the page's
// progress in one transaction, which failed on the lost lease and took the
// outcomes with it: the messages stayed RETRYING (SQLite) or PENDING
// (PostgreSQL), and B sent each a second time.
func TestAnOperationTakenOverDuringASendKeepsTheAcks(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, 2*time.Minute)
		ids := f.ingestTo(t, "orders.dlq.v1", "orders.events.v1", "boom", 0, 5)
		others := f.ingestTo(t, "billing.dlq.v1", "billing.events.v1", "boom", 100, 3)
		before := f.checksums(t)

		daemonB := dlq.NewService(f.store, sources{f.broker}, func() dlq.Policy { return f.policy }, "daemon-b",
			hclog.NewNullLogger(), dlq.NewMetrics(nil, f.store, nil, periodic.New(nil)))
		dlq.SetClock(daemonB, nil, f.clock.now)
		runnerB := dlq.NewOperationRunner(daemonB, func() dlq.OperationConfig {
			return dlq.OperationConfig{PollInterval: 20 * time.Millisecond, Lease: 2 * time.Second, MaxRunning: 2}
		})
		t.Cleanup(func() { _ = runnerB.Stop(context.Background()) })
		var (
			once    sync.Once
			started = make(chan uuid.UUID, 1)
			opID    uuid.UUID
		)
		f.broker.set(func(b *broker) {
			b.during = func() {
				once.Do(func() {
					// A is stalled with the page; its operation lease runs
					// out and B takes the operation over.
					opID = <-started
					if err := runnerB.Start(ctx); err != nil {
						t.Error(err)
						return
					}
					for step := 0; step < 100; step++ {
						f.clock.set(f.clock.now().Add(5 * time.Second))
						time.Sleep(50 * time.Millisecond)
						op, err := daemonB.Operation(ctx, opID)
						if err == nil && op.LeaseOwner == "daemon-b" {
							return
						}
					}
					t.Error("daemon-b never took the operation over")
				})
			}
		})
		startRunner(t, f.svc)
		op, err := f.svc.StartOperation(ctx, dlq.OperationRequest{Action: dlq.ActionRetry,
			Filter: dlq.OperationFilter{Search: dlq.SearchFilter{Topic: "orders.dlq.v1"}}})
		require.NoError(t, err)
		started <- op.ID

		done := waitOperation(t, f.svc, op.ID, finished, "completed")
		require.Equal(t, dlq.OperationCompleted, done.State)
		require.Equal(t, map[string]int64{dlq.ItemRetried: 5}, done.Outcomes, "the messages A sent are counted as retried")
		counts := republishCounts(f.broker)
		for _, id := range ids {
			require.Equal(t, dlq.StatusResolved, f.get(t, id).Status)
			require.Equal(t, 1, counts[id.String()], "sent once")
		}
		after := f.checksums(t)
		for _, id := range others {
			require.Equal(t, before[id], after[id], "another topic's message did not change")
		}
	})
}
