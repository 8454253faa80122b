package store_test

import (
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/migrations"
)

// beforeDigests is, in each dialect's old numbering, the version before
// the digest migration (now 007): an intermediate one, whose rows the
// statement below fits.
var beforeDigests = map[migrations.Dialect]uint{migrations.Postgres: 6, migrations.SQLite: 4}

// TestOldNumberedDatabasesAreRenumbered: a database migrated by a binary
// of before the shared numbering, to its last version or an intermediate
// one, is opened by this one: its version is translated, the migrations
// it lacks are applied, and its rows are kept.
func TestOldNumberedDatabasesAreRenumbered(t *testing.T) {
	for _, d := range storetest.Dialects {
		for _, old := range []uint{migrations.OldLatest[d], beforeDigests[d]} {
			t.Run(fmt.Sprintf("%s/%d", d, old), func(t *testing.T) {
				t.Parallel()
				renumbered(t, d, old)
			})
		}
	}
}

func renumbered(t *testing.T, d migrations.Dialect, old uint) {
	ctx := testsvc.Context(t, time.Minute)
	dsn := storetest.DSN(t, d)
	driver, schema, at, arg := "pgx", "dlq.", any("2026-11-01 12:00:00+00"), "$1"
	if d == migrations.SQLite {
		driver, schema, at, arg = "sqlite", "", time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC).UnixMicro(), "?1"
	}
	db, err := sql.Open(driver, dsn)
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, migrations.MigrateOld(d, db, old))
	msg := uuid.New()
	_, err = db.ExecContext(ctx, fmt.Sprintf(`INSERT INTO %sdlq_messages (id, original_topic, dlq_topic, error_message, status,
		created_at, updated_at, source, source_partition, source_offset, raw_payload, republished_at)
		VALUES ('%s', 'orders.events.v1', 'orders.dlq.v1', 'e', 'PENDING', %s, %[3]s, 'kafka', 0, 7, '{"kept":1}', NULL)`,
		schema, msg, arg), at)
	require.NoError(t, err)
	op := uuid.New()
	if old == migrations.OldLatest[d] {
		_, err = db.ExecContext(ctx, fmt.Sprintf(`INSERT INTO %sdlq_operations (id, action, state, created_at, updated_at)
			VALUES ('%s', 'retry', 'RUNNING', %s, %[3]s)`, schema, op, arg), at)
		require.NoError(t, err)
		_, err = db.ExecContext(ctx, fmt.Sprintf(`INSERT INTO %sdlq_operation_items (operation_id, seq, message_id)
			VALUES ('%s', 1, '%s')`, schema, op, msg))
		require.NoError(t, err)
	}

	// The status reads the version as it will be, and changes nothing.
	st, err := store.MigrationStatus(ctx, d, dsn)
	require.NoError(t, err)
	require.NotEqual(t, st.Latest, st.Current)
	want := uint(6) // both dialects' dlq_integrity
	if old == migrations.OldLatest[d] {
		want = 22 // both dialects' dlq_null_values
	}
	require.Equal(t, want, st.Current)
	var v uint
	require.NoError(t, db.QueryRowContext(ctx, `SELECT version FROM `+migrations.Table).Scan(&v))
	require.Equal(t, old, v, "a status changes nothing")

	s, err := store.Open(ctx, d, dsn)
	require.NoError(t, err)
	defer s.Close()
	st, err = store.MigrationStatus(ctx, d, dsn)
	require.NoError(t, err)
	require.Equal(t, st.Latest, st.Current)
	require.Empty(t, st.Pending)
	m, err := s.GetDLQ(ctx, msg)
	require.NoError(t, err)
	require.Equal(t, []byte(`{"kept":1}`), m.Payload)
	if old == migrations.OldLatest[d] {
		got, err := s.GetDLQOperation(ctx, op)
		require.NoError(t, err)
		require.EqualValues(t, "retry", got.Action)
		items, err := s.DLQOperationItems(ctx, op, 0, 10)
		require.NoError(t, err)
		require.Len(t, items, 1)
		require.Equal(t, msg, items[0].ID)
	}
	if d == migrations.SQLite {
		// The rebuilt dlq_operations (023) keeps its items pointing at it.
		var ref string
		require.NoError(t, db.QueryRowContext(ctx, `SELECT "table" FROM pragma_foreign_key_list('dlq_operation_items')`).Scan(&ref))
		require.Equal(t, "dlq_operations", ref)
		rows, err := db.QueryContext(ctx, `PRAGMA foreign_key_check`)
		require.NoError(t, err)
		require.False(t, rows.Next(), "no item without its operation")
		require.NoError(t, rows.Close())
	}
	// The store works on the schema it was brought to.
	res, err := s.IngestDLQ(ctx, []dlq.Incoming{{Position: dlq.LogPosition("kafka", "orders.dlq.v1", 0, 8),
		OriginalTopic: "orders.events.v1", ErrorMessage: "e", Payload: []byte(`{}`)}}, dlq.IngestOptions{Now: time.Now(), MaxRetries: 3})
	require.NoError(t, err)
	require.Equal(t, 1, res.Inserted)
}
