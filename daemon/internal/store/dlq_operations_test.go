package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
)

// TestOperationFailureTextIsStoredWhateverItHolds: an item's error comes
// from brokers, plugins and stored messages; a NUL byte or a long text cut
// inside a multi-byte character must not make the page's transaction fail
// (PostgreSQL refuses both in text), which would stall the operation.
func TestOperationFailureTextIsStoredWhateverItHolds(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		now := time.Now().UTC().Truncate(time.Microsecond)
		until := now.Add(time.Minute)
		_, err := s.IngestDLQ(ctx, []dlq.Incoming{incoming("orders.dlq.v1", 1, "{}"), incoming("orders.dlq.v1", 2, "{}")},
			dlq.IngestOptions{Now: now, MaxRetries: 3})
		require.NoError(t, err)
		page, err := s.SearchDLQ(ctx, dlq.SearchFilter{Limit: 10, OldestFirst: true})
		require.NoError(t, err)
		require.Len(t, page.Messages, 2)
		op, err := s.CreateDLQOperation(ctx, dlq.Operation{ID: uuid.New(), Action: dlq.ActionRetry, State: dlq.OperationRunning,
			Filter: []byte("{}"), CreatedAt: now, UpdatedAt: now, LeaseOwner: "d1", LeaseExpiresAt: &until},
			dlq.OperationFilter{IDs: []uuid.UUID{page.Messages[0].ID, page.Messages[1].ID}})
		require.NoError(t, err)
		require.EqualValues(t, 2, op.Matched)
		long := strings.Repeat("a", 1999) + "é" + strings.Repeat("b", 5000)
		id := page.Messages[0].ID
		require.NoError(t, s.AdvanceDLQOperation(ctx, dlq.OperationProgress{Operation: op.ID, Owner: "d1", Now: now, Position: 2,
			Results: []dlq.ItemResult{{Seq: 1, ID: id, Outcome: dlq.ItemFailed, Error: "broker said \x00 no"}, {Seq: 2, ID: id, Outcome: dlq.ItemRefused, Error: long}}}))
		failures, err := s.DLQOperationFailures(ctx, op.ID, 10)
		require.NoError(t, err)
		require.Len(t, failures, 2)
		require.Equal(t, "broker said  no", failures[0].Error)
		require.True(t, strings.HasPrefix(failures[1].Error, strings.Repeat("a", 1999)))
		require.NotContains(t, failures[1].Error, "\uFFFD")
		got, err := s.GetDLQOperation(ctx, op.ID)
		require.NoError(t, err)
		require.EqualValues(t, 2, got.Failed)
	})
}
