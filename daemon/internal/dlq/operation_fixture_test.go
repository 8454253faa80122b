package dlq_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/bulk"
	"github.com/lifecycled/lifecycled/internal/testsvc"
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

// startRunner starts an operation runner of ops for the test.
func startRunner(t *testing.T, ops *bulk.Service) *bulk.Runner {
	t.Helper()
	r := bulk.NewRunner(ops, func() bulk.Config {
		return bulk.Config{PollInterval: 20 * time.Millisecond, Lease: 2 * time.Second, MaxRunning: 2}
	}, nil)
	require.NoError(t, r.Start(testsvc.Context(t, time.Minute)))
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	return r
}

// waitOperation waits up to a minute: on SQLite under the race detector a
// page of a few hundred outcomes takes seconds, and CI runs packages side
// by side on two cores. A wait that ends without cond says where the
// operation stood (its state, progress and lease).
func waitOperation(t *testing.T, ops *bulk.Service, id uuid.UUID, cond func(*dlq.Operation) bool, what string) *dlq.Operation {
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

// bulkOf is the bulk operations of svc, a daemon of the test's beside
// the fixture's own.
func bulkOf(st dlq.Store, svc *dlq.Service) *bulk.Service {
	return bulk.NewService(svc, st, hclog.NewNullLogger())
}
