package dlq_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/dlqtest"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// Messages stored before failure groups existed get theirs from the retry
// loop (the lazy part of migration postgres 010 / sqlite 008), the same
// group intake computes, and nothing else about them changes.
func TestRetryLoopBackfillsFailureGroups(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		ids := f.Ingest(t, 3)
		want := f.Get(t, ids[0])
		require.Equal(t, dlq.FailureGroup("orders.events.v1", dlq.LegacyExceptionClass(want.Headers), "boom").ID, want.Group, "intake computes it")
		switch s := f.Store.(type) {
		case *store.Postgres:
			_, err := s.Pool().Exec(ctx, `UPDATE dlq.dlq_messages SET failure_group = '', updated_at = updated_at + interval '1 microsecond'`)
			require.NoError(t, err)
		case *store.SQLite:
			_, err := s.DB().ExecContext(ctx, `UPDATE dlq_messages SET failure_group = ''`)
			require.NoError(t, err)
		}
		require.Empty(t, f.Get(t, ids[0]).Group)
		loop := dlq.NewRetryLoop(f.Svc, func() time.Duration { return time.Hour })
		require.NoError(t, loop.RunOnce(ctx))
		for _, id := range ids {
			m := f.Get(t, id)
			require.Equal(t, want.Group, m.Group)
			require.Equal(t, dlq.StatusPending, m.Status)
			require.Zero(t, m.RetryCount)
		}
		groups, err := f.Svc.Groups(ctx, dlq.GroupFilter{Sort: dlq.GroupsByCount, Limit: 10})
		require.NoError(t, err)
		require.Len(t, groups, 1)
		require.EqualValues(t, 3, groups[0].Counts[dlq.StatusPending])
	})
}
