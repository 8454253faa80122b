package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/migrations"
)

func TestSelectedDialects(t *testing.T) {
	both := []migrations.Dialect{migrations.SQLite, migrations.Postgres}
	require.Equal(t, both, selectedDialects(""))
	require.Equal(t, both, selectedDialects("  "))
	require.Equal(t, []migrations.Dialect{migrations.Postgres}, selectedDialects("postgres"))
	require.Equal(t, []migrations.Dialect{migrations.SQLite}, selectedDialects(" sqlite "))
	require.Equal(t, []migrations.Dialect{migrations.Postgres, migrations.SQLite}, selectedDialects("postgres,sqlite,postgres"))
	require.PanicsWithValue(t, `LIFECYCLED_TEST_STORES: unknown state store "mysql" (sqlite, postgres)`, func() { selectedDialects("sqlite,mysql") })
	require.Panics(t, func() { selectedDialects("sqlite,") }, "an empty name is a typo, not a selection")
}
