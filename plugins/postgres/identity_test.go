package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest"
)

// TestFingerprintNamesTheDatabase: the fingerprint covered the schema
// only, so a deleter whose DSN was repointed at another database with the
// same schema (a staging copy, a restore elsewhere) kept the plan hash an
// operator approved for the first (found by an outside attack). It now
// names the database: the same schema in two databases gives two
// fingerprints, the same database the same one from any plugin process,
// and a Delete checked against the first database's plan refuses the second.
func TestFingerprintNamesTheDatabase(t *testing.T) {
	t.Parallel()
	cfg := map[string]any{"tables": []any{"events", "order_lines", "orders"}}
	one := newSchemaEnv(t, planShop)
	two := newSchemaEnv(t, planShop)
	one.mustConfigure(t, cfg)
	two.mustConfigure(t, cfg)
	fpOne := one.mustPlan(t, "Acme").Fingerprint
	fpTwo := two.mustPlan(t, "Acme").Fingerprint
	require.NotEqual(t, fpOne, fpTwo, "the same schema in two databases")

	again := &schemaEnv{dsn: one.dsn, pool: one.pool, d: plugintest.Launch(t, binary(t), sdk.KindTenantDeleter).Deleter(t)}
	again.mustConfigure(t, cfg)
	require.Equal(t, fpOne, again.mustPlan(t, "Acme").Fingerprint, "the same database from another plugin process")
	again.mustConfigure(t, map[string]any{"tables": cfg["tables"], "batch_size": 2})
	require.Equal(t, fpOne, again.mustPlan(t, "Acme").Fingerprint, "the same database, reconfigured with other tuning")

	// The DSN repointed after the check: the second database is not touched.
	again.d, again.dsn = one.d, two.dsn
	again.mustConfigure(t, cfg)
	before := two.snapshot(t)
	_, err := again.deleteChecked(t, "Acme", fpOne)
	require.Error(t, err)
	require.Equal(t, before, two.snapshot(t), "the other database is unchanged")
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err))
	require.Contains(t, err.Error(), `gone: store `)
	require.Contains(t, err.Error(), `new: store `)
}

// A role that may not read the cluster's system identifier gets the
// server's address and port instead, still with the database: stable for
// one database, different for another.
func TestFingerprintNamesTheDatabaseWithoutPgControl(t *testing.T) {
	t.Parallel()
	cfg := map[string]any{"tables": []any{"events", "order_lines", "orders"}}
	one := newSchemaEnv(t, planShop)
	two := newSchemaEnv(t, planShop)
	role := one.role(t, "lcd_plain", "LOGIN")
	for _, e := range []*schemaEnv{one, two} {
		e.exec(t, `GRANT SELECT, DELETE ON ALL TABLES IN SCHEMA public TO `+role)
		// PUBLIC may execute it by default; a DBA may revoke that (per database).
		e.exec(t, `REVOKE EXECUTE ON FUNCTION pg_catalog.pg_control_system() FROM PUBLIC`)
	}
	var canRead bool
	require.NoError(t, one.pool.QueryRow(testsvc.Context(t, time.Minute), `SELECT has_function_privilege($1, 'pg_catalog.pg_control_system()', 'EXECUTE')`, role).Scan(&canRead))
	require.False(t, canRead, "the test needs a role that cannot read pg_control_system()")

	require.NoError(t, one.configureAs(t, role, cfg))
	require.NoError(t, two.configureAs(t, role, cfg))
	fpOne, fpTwo := one.mustPlan(t, "Acme").Fingerprint, two.mustPlan(t, "Acme").Fingerprint
	require.NotEqual(t, fpOne, fpTwo)
	require.NoError(t, one.configureAs(t, role, map[string]any{"tables": cfg["tables"], "batch_size": 3}))
	require.Equal(t, fpOne, one.mustPlan(t, "Acme").Fingerprint)
}
