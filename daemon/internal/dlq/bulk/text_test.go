package bulk_test

import (
	"fmt"
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

// TestBulkDeleteByTextDeletesExactlyItsMatches: a bulk delete whose filter
// is a payload text (q) deletes the messages whose payload holds the text,
// in any case, whether the search index holds them or they still wait for
// the indexer, and no other: payloads that share most of the text's
// trigrams without holding it stay as they were.
func TestBulkDeleteByTextDeletesExactlyItsMatches(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, time.Minute)
		matches := []string{`{"order":"ORD-42"}`, `{"order":"ord-42"}`, `{"note":"xx ORD-4200 yy"}`, `order ORD-42 in plain text`}
		nearMisses := []string{`{"order":"ORD-4 2"}`, `{"order":"ORD_42"}`, `{"order":"RD-42"}`, `{"order":"ORD-4"}`,
			`{"order":"ORD-24"}`, `{"order":"OR D-42"}`, `{"order":"ORD-\u00ad42"}`}
		offset := 0
		store := func(payloads []string) map[string]uuid.UUID {
			t.Helper()
			batch := make([]dlq.Incoming, len(payloads))
			for i, p := range payloads {
				batch[i] = dlq.Incoming{Position: dlq.LogPosition("kafka", "orders.dlq.v1", 0, int64(offset)),
					OriginalTopic: "orders.events.v1", ErrorMessage: "boom", Payload: []byte(p)}
				offset++
			}
			_, err := f.Store.IngestDLQ(ctx, batch, dlq.IngestOptions{Now: f.Clock.Now(), MaxRetries: f.Policy.MaxRetries})
			require.NoError(t, err)
			ids := map[string]uuid.UUID{}
			for _, m := range f.Everything(t) {
				for _, p := range payloads {
					if string(m.Payload) == p {
						ids[p] = m.ID
					}
				}
			}
			require.Len(t, ids, len(payloads))
			return ids
		}
		// Half of each kind is indexed before the operation, half waits.
		indexed := append(append([]string{}, matches[:2]...), nearMisses[:4]...)
		waiting := append(append([]string{}, matches[2:]...), nearMisses[4:]...)
		ids := store(indexed)
		for {
			_, left, err := f.Store.IndexDLQSearch(ctx)
			require.NoError(t, err)
			if left == 0 {
				break
			}
		}
		for p, id := range store(waiting) {
			ids[p] = id
		}
		before := f.Checksums(t)

		dlqtest.StartRunner(t, f.Ops)
		matched, sample, err := f.Ops.DryRunOperation(ctx, bulk.Request{Action: dlq.ActionDelete,
			Filter: dlq.OperationFilter{Search: dlq.SearchFilter{Text: "ORD-42"}}}, 10)
		require.NoError(t, err)
		require.EqualValues(t, len(matches), matched, "dry run")
		require.Len(t, sample, len(matches), "dry run sample")
		op, err := f.Ops.StartOperation(ctx, bulk.Request{Action: dlq.ActionDelete,
			Filter: dlq.OperationFilter{Search: dlq.SearchFilter{Text: "ORD-42"}}})
		require.NoError(t, err)
		op = dlqtest.WaitOperation(t, f.Ops, op.ID, dlqtest.Finished, "delete")
		require.Equal(t, dlq.OperationCompleted, op.State)
		require.Equal(t, map[string]int64{dlq.ItemDeleted: int64(len(matches))}, op.Outcomes)
		for _, p := range matches {
			_, err := f.Svc.Get(ctx, ids[p])
			require.ErrorIs(t, err, derrors.ErrNotFound, "%s holds the text", p)
		}
		var stay []uuid.UUID
		for _, p := range nearMisses {
			stay = append(stay, ids[p])
		}
		f.RequireUntouched(t, before, stay)
		require.Len(t, f.Checksums(t), len(nearMisses), fmt.Sprintf("only the %d near misses are left", len(nearMisses)))
	})
}
