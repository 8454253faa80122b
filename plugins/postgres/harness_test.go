package main

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest"
)

// schemaEnv is a fresh database loaded with one schema, and a running
// plugin to erase tenants from it.
type schemaEnv struct {
	dsn  string
	pool *pgxpool.Pool
	d    sdk.TenantDeleter
}

func newSchemaEnv(t *testing.T, ddl string) *schemaEnv {
	t.Helper()
	dsn := testsvc.PGDatabase(t)
	ctx := testsvc.Context(t, time.Minute)
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, ddl)
	require.NoError(t, err, "load schema")
	p := plugintest.Launch(t, binary(t), sdk.KindTenantDeleter)
	return &schemaEnv{dsn: dsn, pool: pool, d: p.Deleter(t)}
}

func (e *schemaEnv) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := e.pool.Exec(testsvc.Context(t, time.Minute), sql, args...)
	require.NoError(t, err, sql)
}

// configure applies cfg with the env's DSN filled in.
func (e *schemaEnv) configure(t *testing.T, cfg map[string]any) (*sdk.ConfigureResponse, error) {
	t.Helper()
	full := map[string]any{"dsn": e.dsn}
	for k, v := range cfg {
		full[k] = v
	}
	// The most permissive format the daemon allows: the deleter's own checks
	// (the column type's canonical spelling) are what these tests exercise.
	return e.d.Configure(testsvc.Context(t, time.Minute), &sdk.ConfigureRequest{Name: "postgres:test", Config: full, TenantIDFormat: anyTenantID})
}

func (e *schemaEnv) mustConfigure(t *testing.T, cfg map[string]any) *sdk.ConfigureResponse {
	t.Helper()
	resp, err := e.configure(t, cfg)
	require.NoError(t, err)
	return resp
}

func (e *schemaEnv) count(t *testing.T, tenant string) (*sdk.CountResponse, error) {
	return e.d.Count(testsvc.Context(t, time.Minute), &sdk.CountRequest{TenantID: tenant})
}

// verify runs the independent proof for tenant.
func (e *schemaEnv) verify(t *testing.T, tenant string) *sdk.VerifyResponse {
	t.Helper()
	v, ok := e.d.(sdk.Verifier)
	require.True(t, ok, "the deleter's client is a Verifier")
	resp, err := v.Verify(testsvc.Context(t, time.Minute), &sdk.VerifyRequest{TenantID: tenant})
	require.NoError(t, err, "Verify(%s)", tenant)
	return resp
}

func (e *schemaEnv) delete(t *testing.T, tenant string) (*sdk.DeleteResponse, error) {
	return e.d.Delete(testsvc.Context(t, 5*time.Minute), &sdk.DeleteRequest{TenantID: tenant}, func(int64) {})
}

// anyTenantID is a tenant_id_format that accepts any printable id.
const anyTenantID = `^.+$`

// rowSet is every row of every user table, as text, per table.
type rowSet map[string][]string

// snapshot reads every row of every ordinary and partitioned table outside
// the system schemas (partitioned tables through their root only).
func (e *schemaEnv) snapshot(t *testing.T) rowSet {
	t.Helper()
	ctx := testsvc.Context(t, time.Minute)
	rows, err := e.pool.Query(ctx, `
		SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
			AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'
			AND NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid)`)
	require.NoError(t, err)
	var tables [][2]string
	for rows.Next() {
		var s, n string
		require.NoError(t, rows.Scan(&s, &n))
		tables = append(tables, [2]string{s, n})
	}
	require.NoError(t, rows.Err())
	out := rowSet{}
	for _, tb := range tables {
		name := tb[0] + "." + tb[1]
		var texts []string
		// tableoid::regclass tells partitions apart; ctid is not data.
		err := e.pool.QueryRow(ctx, fmt.Sprintf(`SELECT coalesce(array_agg(x.tableoid::regclass::text || ' ' || x::text ORDER BY x::text), '{}') FROM %s x`,
			pgx.Identifier{tb[0], tb[1]}.Sanitize())).Scan(&texts)
		require.NoError(t, err, name)
		sort.Strings(texts)
		out[name] = texts
	}
	return out
}

// rowsWhere returns the rows of table ("schema.name", unquoted) matching
// pred, in snapshot form.
func (e *schemaEnv) rowsWhere(t *testing.T, table, pred string) []string {
	t.Helper()
	schema, name, _ := strings.Cut(table, ".")
	var texts []string
	err := e.pool.QueryRow(testsvc.Context(t, time.Minute), fmt.Sprintf(
		`SELECT coalesce(array_agg(x.tableoid::regclass::text || ' ' || x::text ORDER BY x::text), '{}') FROM %s x WHERE %s`,
		pgx.Identifier{schema, name}.Sanitize(), pred)).Scan(&texts)
	require.NoError(t, err, "%s where %s", table, pred)
	sort.Strings(texts)
	return texts
}

// victimRows names, per table, the rows a deletion must remove (a SQL
// predicate over alias x); everything else must stay byte for byte.
type victimRows map[string]string

// expectErased erases tenant and checks that exactly the victim rows went:
// every other row of every table is unchanged, and the report's count and
// breakdown match what was removed.
func (e *schemaEnv) expectErased(t *testing.T, tenant string, victims victimRows) *sdk.DeleteResponse {
	t.Helper()
	before := e.snapshot(t)
	want := rowSet{}
	gone := map[string]int64{}
	var total int64
	for table, rows := range before {
		want[table] = rows
	}
	for table, pred := range victims {
		v := e.rowsWhere(t, table, pred)
		require.NotEmpty(t, v, "the test seeds victim rows in %s", table)
		want[table] = minus(want[table], v)
		gone[table] = int64(len(v))
		total += int64(len(v))
	}
	c, err := e.count(t, tenant)
	require.NoError(t, err, "Count(%s)", tenant)
	require.Equal(t, total, c.Count, "Count(%s) before deleting", tenant)
	require.Equal(t, gone, nonZero(c.Breakdown), "Count(%s) breakdown", tenant)

	resp, err := e.delete(t, tenant)
	require.NoError(t, err, "Delete(%s)", tenant)
	after := e.snapshot(t)
	for table := range before {
		require.Equal(t, want[table], after[table], "rows of %s after erasing %s: only the victim rows may go", table, tenant)
	}
	require.Equal(t, total, resp.DeletedCount, "reported deleted count")
	require.Equal(t, gone, nonZero(resp.Breakdown), "reported breakdown")

	require.NotEmpty(t, resp.Proof, "Delete reports its proof")
	require.Zero(t, sdk.ProofLeft(resp.Proof), "Delete's proof: %+v", resp.Proof)
	v := e.verify(t, tenant)
	require.Zero(t, v.Left(), "the independent proof after deleting: %+v", v.Checks)

	c, err = e.count(t, tenant)
	require.NoError(t, err)
	require.Zero(t, c.Count, "Count(%s) after deleting", tenant)
	again, err := e.delete(t, tenant)
	require.NoError(t, err, "second Delete(%s)", tenant)
	require.Zero(t, again.DeletedCount)
	return resp
}

// expectRefused checks that Delete and Count of tenant fail permanently with
// a message containing every fragment, and that nothing changed.
func (e *schemaEnv) expectRefused(t *testing.T, tenant string, fragments ...string) error {
	t.Helper()
	before := e.snapshot(t)
	_, err := e.delete(t, tenant)
	require.Error(t, err, "Delete(%s) must be refused", tenant)
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err), "%v", err)
	deleted, _ := sdk.DeletedBefore(err)
	require.Zero(t, deleted, "a refusal deletes nothing")
	for _, f := range fragments {
		require.Contains(t, err.Error(), f)
	}
	require.Equal(t, before, e.snapshot(t), "a refused Delete changes nothing")
	_, cerr := e.count(t, tenant)
	require.Error(t, cerr, "Count(%s) reports the same problem", tenant)
	return err
}

func minus(all, remove []string) []string {
	drop := map[string]int{}
	for _, r := range remove {
		drop[r]++
	}
	out := []string{}
	for _, r := range all {
		if drop[r] > 0 {
			drop[r]--
			continue
		}
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

func nonZero(m map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// withAction fills the ON DELETE action into a schema.
func withAction(ddl, action string) string { return strings.ReplaceAll(ddl, "{action}", action) }
