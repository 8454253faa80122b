package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
)

// The store writes the status changes the status machine decides and no
// rule of its own: over the whole state space (every status, attempts left
// or used up, an original topic or none), a bulk "dead" changes exactly the
// messages dlq.State.Next lets be buried, to the state Next gives, and
// leaves every other message as it was.
func TestMarkDeadFollowsTheStatusMachineOverTheStateSpace(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		type cell struct {
			state dlq.State
			id    uuid.UUID
		}
		var cells []cell
		offset := int64(0)
		for _, st := range dlq.Statuses {
			for _, used := range []int{0, 3} {
				for _, noTopic := range []bool{false, true} {
					in := incoming("rules.dlq.v1", offset, fmt.Sprintf(`{"n":%d}`, offset))
					if noTopic {
						in.OriginalTopic = ""
					}
					offset++
					ingest(t, s, t0, in)
					cells = append(cells, cell{state: dlq.State{Status: st, RetryCount: used, MaxRetries: 3, NoOriginalTopic: noTopic}})
				}
			}
		}
		msgs, _, err := s.ListDLQ(ctx, dlq.ListFilter{Topic: "rules.dlq.v1", Page: 1, PageSize: 100})
		require.NoError(t, err)
		require.Len(t, msgs, len(cells))
		byOffset := map[int64]uuid.UUID{}
		for _, m := range msgs {
			byOffset[m.Position.Offset()] = m.ID
		}
		for i := range cells {
			cells[i].id = byOffset[int64(i)]
			c := cells[i].state
			exec(t, s, `UPDATE dlq.dlq_messages SET status = $2, retry_count = $3, max_retries = $4 WHERE id = $1`,
				`UPDATE dlq_messages SET status = ?2, retry_count = ?3, max_retries = ?4 WHERE id = ?1`,
				cells[i].id, string(c.Status), c.RetryCount, c.MaxRetries)
		}

		until := t0.Add(time.Hour)
		op, err := s.CreateDLQOperation(ctx, dlq.Operation{ID: uuid.New(), Action: dlq.ActionDead, State: dlq.OperationRunning,
			Filter: []byte("{}"), CreatedAt: t0, UpdatedAt: t0, LeaseOwner: "d1", LeaseExpiresAt: &until},
			dlq.OperationFilter{Search: dlq.SearchFilter{Topic: "rules.dlq.v1"}})
		require.NoError(t, err)
		items, err := s.DLQOperationItems(ctx, op.ID, 0, len(cells))
		require.NoError(t, err)
		require.Len(t, items, len(cells))
		prog, err := s.ApplyDLQOperationPage(ctx, dlq.PageAction{Action: dlq.ActionDead, Items: items, Operation: op.ID, Now: t0},
			dlq.OperationProgress{Operation: op.ID, Owner: "d1", Now: t0, After: 0, Position: int64(len(items))})
		require.NoError(t, err)
		outcome := map[uuid.UUID]string{}
		for _, r := range prog.Results {
			outcome[r.ID] = r.Outcome
		}

		buried := 0
		for _, c := range cells {
			m, err := s.GetDLQ(ctx, c.id)
			require.NoError(t, err)
			want, ok := c.state.Next(dlq.EventBuried)
			what := fmt.Sprintf("%+v", c.state)
			if ok {
				buried++
				require.Equal(t, dlq.ItemMarkedDead, outcome[c.id], what)
			} else {
				require.Equal(t, dlq.ItemSkipped, outcome[c.id], what)
				want = c.state
			}
			require.Equal(t, want.Status, m.Status, what)
			require.Equal(t, want.RetryCount, m.RetryCount, what)
			require.Equal(t, want.MaxRetries, m.MaxRetries, what)
		}
		require.Positive(t, buried, "some states are buried")
		require.Less(t, buried, len(cells), "and some are not")
	})
}
