package store_test

import (
	"database/sql"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/migrations"
)

// TestPlansApprovalMigrationDown: going down, a job awaiting approval is
// cancelled (an older lifecycled could neither approve it nor tell it from
// a SCHEDULED job that never comes due); other jobs keep everything but
// their plan hash; going up again works.
func TestPlansApprovalMigrationDown(t *testing.T) {
	eachEmpty(t, func(t *testing.T, d migrations.Dialect, dsn string) {
		s, err := store.Open(ctx(t), d, dsn)
		require.NoError(t, err)
		hash, body := testShape("public.orders")
		require.NoError(t, s.SavePlan(ctx(t), hash, body, t0))
		waiting := createJob(t, ctx(t), s, deletion.JobRequest{Tenant: uuid.NewString(), PlanHash: hash, RequireApproval: true}, t0)
		plain := createJob(t, ctx(t), s, deletion.JobRequest{Tenant: uuid.NewString(), PlanHash: hash}, t0)
		require.NoError(t, s.Close())

		db, err := sql.Open(driverOf(d), dsn)
		require.NoError(t, err)
		defer db.Close()
		steps := stepsThrough(t, d, "plans_approval")
		require.NoError(t, migrations.Steps(d, db, -steps))
		require.NoError(t, migrations.Steps(d, db, steps))

		s, err = store.Open(ctx(t), d, dsn)
		require.NoError(t, err)
		defer s.Close()
		w, err := s.LatestDeletionJob(ctx(t), waiting.TenantID)
		require.NoError(t, err)
		require.Equal(t, deletion.JobCancelled, w.Status)
		require.Contains(t, w.LastError, "schema downgrade")
		p, err := s.LatestDeletionJob(ctx(t), plain.TenantID)
		require.NoError(t, err)
		require.Equal(t, deletion.JobPending, p.Status)
		require.Empty(t, p.PlanHash, "the column went with the migration")
	})
}
