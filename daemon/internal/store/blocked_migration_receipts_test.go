package store_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/migrations"
)

// TestSQLiteJobTableRebuildKeepsReceipts: SQLite's blocked_jobs migration
// rebuilds deletion_jobs; with foreign keys on, dropping the old table
// cascaded into deletion_receipts and deleted every erasure receipt. Both
// directions must keep them.
func TestSQLiteJobTableRebuildKeepsReceipts(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "state.db")
	_, err := store.MigrateUp(ctx(t), migrations.SQLite, dsn)
	require.NoError(t, err)
	db, err := sql.Open("sqlite", "file:"+dsn+"?_pragma=foreign_keys(1)")
	require.NoError(t, err)
	defer db.Close()
	steps := stepsThrough(t, migrations.SQLite, "blocked_jobs")
	require.NoError(t, migrations.Steps(migrations.SQLite, db, -steps))
	_, err = db.Exec(`INSERT INTO deletion_jobs (id, tenant_id, status, created_at, updated_at) VALUES ('j1', 't', 'COMPLETED', 1, 1)`)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO deletion_receipts (job_id, key_id, body, issued_at) VALUES ('j1', 'k', x'7b7d', 1)`)
	require.NoError(t, err)
	receipts := func() (n int, body []byte) {
		require.NoError(t, db.QueryRow(`SELECT count(*), max(body) FROM deletion_receipts`).Scan(&n, &body))
		return n, body
	}
	require.NoError(t, migrations.Steps(migrations.SQLite, db, steps))
	n, body := receipts()
	require.Equal(t, 1, n, "the receipt survives the rebuild going up")
	require.Equal(t, []byte("{}"), body)
	require.NoError(t, migrations.Steps(migrations.SQLite, db, -steps))
	n, _ = receipts()
	require.Equal(t, 1, n, "and going down")
	_, err = db.Exec(`DELETE FROM deletion_jobs WHERE id = 'j1'`)
	require.NoError(t, err)
	n, _ = receipts()
	require.Zero(t, n, "the receipt still belongs to its job (the foreign key is back)")
}
