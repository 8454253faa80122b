package store_test

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
	"github.com/lifecycled/lifecycled/migrations"
)

// eachEmpty runs fn on a fresh store of each dialect that nothing has
// migrated yet, at dsn.
func eachEmpty(t *testing.T, fn func(t *testing.T, d migrations.Dialect, dsn string)) {
	for _, d := range storetest.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			fn(t, d, storetest.DSN(t, d))
		})
	}
}

// driverOf names the database/sql driver that golang-migrate uses for d.
func driverOf(d migrations.Dialect) string {
	if d == migrations.Postgres {
		return "pgx"
	}
	return "sqlite"
}

func TestMigrationsStatusAndNewerSchemaRefused(t *testing.T) {
	eachEmpty(t, func(t *testing.T, d migrations.Dialect, dsn string) {
		c := ctx(t)
		st, err := store.MigrationStatus(c, d, dsn)
		require.NoError(t, err)
		require.EqualValues(t, 0, st.Current)
		require.NotEmpty(t, st.Pending)

		st, err = store.MigrateUp(c, d, dsn)
		require.NoError(t, err)
		require.Equal(t, st.Latest, st.Current)
		require.Empty(t, st.Pending)

		// Up again changes nothing.
		st2, err := store.MigrateUp(c, d, dsn)
		require.NoError(t, err)
		require.Equal(t, st, st2)

		// A newer lifecycled migrated this database: refuse to run on it.
		s, err := store.Open(c, d, dsn)
		require.NoError(t, err)
		bump := fmt.Sprintf("UPDATE %s SET version = 999", migrations.Table)
		switch x := s.(type) {
		case *store.SQLite:
			_, err = x.DB().ExecContext(c, bump)
		case *store.Postgres:
			_, err = x.Pool().Exec(c, bump)
		}
		require.NoError(t, err)
		s.Close()
		_, err = store.Open(c, d, dsn)
		require.ErrorIs(t, err, migrations.ErrSchemaNewer)
		require.ErrorContains(t, err, "version 999")
		require.ErrorContains(t, err, "upgrade lifecycled")
	})
}

// TestMigrationsGoDownAndUpAgain checks every .down.sql file against its
// .up.sql: down to nothing, then up again, on both stores.
func TestMigrationsGoDownAndUpAgain(t *testing.T) {
	eachEmpty(t, func(t *testing.T, d migrations.Dialect, dsn string) {
		c := ctx(t)
		up, err := store.MigrateUp(c, d, dsn)
		require.NoError(t, err)
		db, err := sql.Open(driverOf(d), dsn)
		require.NoError(t, err)
		defer db.Close()
		require.NoError(t, migrations.Down(d, db))
		st, err := store.MigrationStatus(c, d, dsn)
		require.NoError(t, err)
		require.EqualValues(t, 0, st.Current)
		again, err := store.MigrateUp(c, d, dsn)
		require.NoError(t, err)
		require.Equal(t, up, again)
	})
}

// The down migration keeps what the older schema can hold: a header key
// that is not UTF-8 becomes "base64:<base64>" text.
func TestIntegrityMigrationDownAndUpKeepsHeaders(t *testing.T) {
	eachEmpty(t, func(t *testing.T, d migrations.Dialect, dsn string) {
		s, err := store.Open(ctx(t), d, dsn)
		require.NoError(t, err)
		in := incoming("m.dlq.v1", 1, `{}`)
		in.Headers = []dlq.Header{{Key: []byte("bad\xff"), Value: []byte("v")}, {Key: []byte("ok"), Value: []byte("w")}}
		ingest(t, s, t0, in)
		id := onlyMessage(t, s, "m.dlq.v1").ID
		require.NoError(t, s.Close())

		db, err := sql.Open(driverOf(d), dsn)
		require.NoError(t, err)
		defer db.Close()
		// Down through the integrity migration and back up.
		names, err := migrations.Available(d)
		require.NoError(t, err)
		steps := 0
		for i := len(names) - 1; i >= 0 && !strings.Contains(names[i], "dlq_integrity"); i-- {
			steps++
		}
		require.Less(t, steps, len(names), "the integrity migration exists")
		require.NoError(t, migrations.Steps(d, db, -(steps+1)))
		require.NoError(t, migrations.Steps(d, db, steps+1))

		s, err = store.Open(ctx(t), d, dsn)
		require.NoError(t, err)
		defer s.Close()
		m, err := s.GetDLQ(ctx(t), id)
		require.NoError(t, err)
		require.Equal(t, []dlq.Header{{Key: []byte("base64:YmFk/w=="), Value: []byte("v")}, {Key: []byte("ok"), Value: []byte("w")}}, m.Headers)
	})
}
