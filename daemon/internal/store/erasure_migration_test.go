package store_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/migrations"
)

// TestErasureDepthMigrationKeepsJobs: jobs and their deleters (with their
// breakdowns) survive the erasure-depth migration going down and up again
// (SQLite rebuilds both tables); going down refuses while a CANCELLED job
// exists, which an older lifecycled would run.
func TestErasureDepthMigrationKeepsJobs(t *testing.T) {
	eachEmpty(t, func(t *testing.T, d migrations.Dialect, dsn string) {
		s, err := store.Open(ctx(t), d, dsn)
		require.NoError(t, err)
		tenant := uuid.NewString()
		job, _, err := s.CreateDeletionJob(ctx(t), tenant, []string{"postgres:app", "redis:sessions"}, t0)
		require.NoError(t, err)
		_, err = s.ClaimDeletionJob(ctx(t), "d1", t0, t0.Add(time.Minute), 0)
		require.NoError(t, err)
		pg := deletion.DeleterState{Name: "postgres:app", Status: deletion.DeleterFailed, DeletedCount: 7, Total: 12, Attempts: 1,
			Error: "connection refused", UpdatedAt: t0, TotalBreakdown: map[string]int64{"public.steps": 12},
			DeletedBreakdown: map[string]int64{"public.steps": 7}}
		require.NoError(t, s.SetDeleterState(ctx(t), job.ID, "d1", pg))
		next := t0.Add(time.Hour)
		require.NoError(t, s.FinishDeletionAttempt(ctx(t), job.ID, "d1", deletion.JobUpdate{Status: deletion.JobPartial,
			LastError: "1 deleter failed", NextAttemptAt: &next, Now: t0}))
		before, err := s.LatestDeletionJob(ctx(t), tenant)
		require.NoError(t, err)
		require.NoError(t, s.Close())

		db, err := sql.Open(driverOf(d), dsn)
		require.NoError(t, err)
		defer db.Close()
		steps := stepsThrough(t, d, "erasure_depth")
		require.NoError(t, migrations.Steps(d, db, -steps))
		require.NoError(t, migrations.Steps(d, db, steps))

		s, err = store.Open(ctx(t), d, dsn)
		require.NoError(t, err)
		after, err := s.LatestDeletionJob(ctx(t), tenant)
		require.NoError(t, err)
		require.NotNil(t, before.StartedAt)
		before.StartedAt = nil // a column of the migration: gone with it
		require.Equal(t, before, after, "the job and its deleters, as they were")

		// A cancelled job cannot go back to a schema without CANCELLED.
		_, _, err = s.CancelDeletionJob(ctx(t), tenant, nil, t0.Add(time.Minute))
		require.NoError(t, err)
		require.NoError(t, s.Close())
		require.Error(t, migrations.Steps(d, db, -steps), "the down migration refuses")
	})
}
