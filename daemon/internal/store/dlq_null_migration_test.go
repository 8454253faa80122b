package store_test

import (
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/migrations"
)

// Rows keep their meaning across the migration that tells null values
// from truncated ones (022). Down, a null value goes
// back to empty, as it was stored before, and a truncated message stays
// NULL, which then meant "not kept"; up again, that NULL is a truncated
// message, not a null value, and empty stays empty. Nothing else changes.
func TestNullValuesMigrationKeepsWhatRowsMeant(t *testing.T) {
	eachEmpty(t, func(t *testing.T, d migrations.Dialect, dsn string) {
		s, err := store.Open(ctx(t), d, dsn)
		require.NoError(t, err)
		empty := incoming("m.dlq.v1", 1, "")
		truncated := incoming("m.dlq.v1", 2, "")
		truncated.Payload, truncated.Truncated, truncated.Dead = nil, true, true
		null := incoming("m.dlq.v1", 3, "")
		null.Payload = nil
		ingest(t, s, t0, empty, truncated, null, incoming("other.dlq.v1", 1, `{"a":1}`))
		other := onlyMessage(t, s, "other.dlq.v1")
		require.NoError(t, s.Close())

		db, err := sql.Open(driverOf(d), dsn)
		require.NoError(t, err)
		defer db.Close()
		steps := stepsThrough(t, d, "dlq_null_values")
		require.NoError(t, migrations.Steps(d, db, -steps))
		require.NoError(t, migrations.Steps(d, db, steps))

		s, err = store.Open(ctx(t), d, dsn)
		require.NoError(t, err)
		defer s.Close()
		msgs, _, err := s.ListDLQ(ctx(t), dlq.ListFilter{Topic: "m.dlq.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.Len(t, msgs, 3)
		for _, m := range msgs {
			switch m.Position.Offset() {
			case 1, 3:
				require.False(t, m.Truncated, "offset %d", m.Position.Offset())
				require.NotNil(t, m.Payload, "offset %d: empty, as stored before null values had a meaning", m.Position.Offset())
				require.Empty(t, m.Payload)
			case 2:
				require.True(t, m.Truncated, "a NULL payload was a truncated message, and stays one")
				require.Nil(t, m.Payload)
			}
		}
		after, err := s.GetDLQ(ctx(t), other.ID)
		require.NoError(t, err)
		require.Equal(t, other, *after, "another message does not change")
	})
}
