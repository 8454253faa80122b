package dlqtest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/bulk"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// NewRunner is a runner of ops's operations for a test, not started;
// it is stopped when the test ends.
func NewRunner(t *testing.T, ops *bulk.Service) *bulk.Runner {
	r := bulk.NewRunner(ops, func() bulk.Config {
		return bulk.Config{PollInterval: 20 * time.Millisecond, Lease: 2 * time.Second, MaxRunning: 2}
	}, nil)
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	return r
}

// StartRunner starts a runner of ops's operations for the test.
func StartRunner(t *testing.T, ops *bulk.Service) *bulk.Runner {
	t.Helper()
	r := NewRunner(t, ops)
	require.NoError(t, r.Start(testsvc.Context(t, time.Minute)))
	return r
}

// WaitOperation waits up to a minute: on SQLite under the race detector a
// page of a few hundred outcomes takes seconds, and CI runs packages side
// by side on two cores. A wait that ends without cond says where the
// operation stood (its state, progress and lease).
func WaitOperation(t *testing.T, ops *bulk.Service, id uuid.UUID, cond func(*dlq.Operation) bool, what string) *dlq.Operation {
	t.Helper()
	var op *dlq.Operation
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		var err error
		op, err = ops.Operation(testsvc.Context(t, 30*time.Second), id)
		require.NoError(t, err)
		if cond(op) {
			return op
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within a minute: %s; the operation: state %s, done %d of %d, outcomes %v, lease %q until %s, position %d, done ranges %v",
				what, op.State, op.Done, op.Matched, op.Outcomes, op.LeaseOwner, FmtTime(op.LeaseExpiresAt), op.Position, op.DoneRanges)
		}
	}
}

// Finished reports whether op ended.
func Finished(op *dlq.Operation) bool { return op.Finished() }

// RepublishCounts is how many times b acknowledged each message, by id.
func RepublishCounts(b *Broker) map[string]int {
	out := map[string]int{}
	for _, id := range b.RepublishedIDs() {
		out[id]++
	}
	return out
}
