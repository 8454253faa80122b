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

// TestAnOperationWhoseSetCannotBeFixedIsNotCreated: when storing the
// operation's set fails, creating it fails and leaves nothing: neither an
// operation that acts on no message nor part of its set. A trigger refuses
// the set's rows here; with a text filter the set is fixed through its
// text candidates, whose query ran before (an error of the insert after it
// was lost, and SQLite committed an operation of 0 messages).
func TestAnOperationWhoseSetCannotBeFixedIsNotCreated(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		now := time.Now().UTC()
		_, err := s.IngestDLQ(ctx, []dlq.Incoming{incoming("orders.dlq.v1", 1, `{"order":"ORD-1"}`), incoming("orders.dlq.v1", 2, `{"order":"ORD-2"}`)},
			dlq.IngestOptions{Now: now, MaxRetries: 3})
		require.NoError(t, err)
		exec(t, s, `CREATE FUNCTION dlq.refuse_items() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'no items today'; END $$ LANGUAGE plpgsql;
			CREATE TRIGGER refuse_items BEFORE INSERT ON dlq.dlq_operation_items FOR EACH ROW EXECUTE FUNCTION dlq.refuse_items()`,
			`CREATE TRIGGER refuse_items BEFORE INSERT ON dlq_operation_items BEGIN SELECT RAISE(ABORT, 'no items today'); END`)
		until := now.Add(time.Minute)
		for name, f := range map[string]dlq.SearchFilter{
			"q":     {Text: "ORD-"},
			"error": {Error: "PROCESSING failed"},
			"topic": {Topic: "orders.dlq.v1"},
		} {
			_, err := s.CreateDLQOperation(ctx, dlq.Operation{ID: uuid.New(), Action: dlq.ActionDelete, State: dlq.OperationRunning,
				Filter: []byte("{}"), CreatedAt: now, UpdatedAt: now, LeaseOwner: "d1", LeaseExpiresAt: &until},
				dlq.OperationFilter{Search: f})
			require.ErrorContains(t, err, "no items today", name)
		}
		ops, err := s.ListDLQOperations(ctx, 10, false)
		require.NoError(t, err)
		require.Empty(t, ops, "no operation was created")
		require.Zero(t, count(t, s, `SELECT count(*)::int FROM dlq.dlq_operation_items`, `SELECT count(*) FROM dlq_operation_items`))
	})
}

// TestAnOperationsSetIsTheMatchesOfOneMoment: the set of an operation
// with a text filter is what the filter matched at one moment, even when
// a change commits between the read of its text candidates and the read
// of its set: here one message stops matching and another starts to. Read
// in two snapshots, the set held neither (the first was checked on its new
// text, the second was no candidate). SQLite has one writer: nothing
// commits between the two.
func TestAnOperationsSetIsTheMatchesOfOneMoment(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		if _, ok := s.(*store.Postgres); !ok {
			t.Skip("SQLite: one writer at a time, nothing commits inside the operation's transaction")
		}
		now := time.Now().UTC()
		old := incoming("orders.dlq.v1", 1, `{"order":"ORD-1"}`)
		old.ErrorMessage = "quota exceeded for tenant t1"
		ingest(t, s, now, old)
		before := search(t, s, dlq.SearchFilter{Error: "quota exceeded"}).Messages
		require.Len(t, before, 1)
		store.AfterBulkCandidates(s, func() {
			exec(t, s, `UPDATE dlq.dlq_messages SET error_message = 'connection refused' WHERE id = $1`, ``, before[0].ID)
			later := incoming("orders.dlq.v1", 2, `{"order":"ORD-2"}`)
			later.ErrorMessage = "quota exceeded for tenant t2"
			ingest(t, s, now, later)
		})
		until := now.Add(time.Minute)
		op, err := s.CreateDLQOperation(ctx, dlq.Operation{ID: uuid.New(), Action: dlq.ActionDead, State: dlq.OperationRunning,
			Filter: []byte("{}"), CreatedAt: now, UpdatedAt: now, LeaseOwner: "d1", LeaseExpiresAt: &until},
			dlq.OperationFilter{Search: dlq.SearchFilter{Error: "quota exceeded"}})
		store.AfterBulkCandidates(s, nil)
		require.NoError(t, err)
		items, err := s.DLQOperationItems(ctx, op.ID, 0, 10)
		require.NoError(t, err)
		require.Len(t, items, 1, "the set when the operation started")
		require.Equal(t, before[0].ID, items[0].ID)
		require.EqualValues(t, 1, op.Matched)
	})
}

// TestOperationActionsAreNotListedInTheSchema: the actions are declared
// once, in Go (dlq.OperationActions); the store keeps any action, one that
// the schema's CHECK refused before migration 023 too, so that a new action
// needs no migration.
func TestOperationActionsAreNotListedInTheSchema(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		now := time.Now().UTC().Truncate(time.Microsecond)
		until := now.Add(time.Minute)
		ingest(t, s, now, incoming("orders.dlq.v1", 1, "{}"))
		id := onlyMessage(t, s, "orders.dlq.v1").ID
		const action dlq.OperationAction = "quarantine" // not among those of migration 015's CHECK
		op, err := s.CreateDLQOperation(ctx, dlq.Operation{ID: uuid.New(), Action: action, State: dlq.OperationRunning,
			Filter: []byte("{}"), CreatedAt: now, UpdatedAt: now, LeaseOwner: "d1", LeaseExpiresAt: &until},
			dlq.OperationFilter{IDs: []uuid.UUID{id}})
		require.NoError(t, err)
		got, err := s.GetDLQOperation(ctx, op.ID)
		require.NoError(t, err)
		require.Equal(t, action, got.Action)
		items, err := s.DLQOperationItems(ctx, op.ID, 0, 10)
		require.NoError(t, err)
		require.Len(t, items, 1, "the rebuilt table's items still belong to it")
	})
}
