package main

import (
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest"
)

func binary(t testing.TB) string { return testsvc.Binary(t, "lifecycled-plugin-mysql") }

// anyTenantID is a tenant_id_format that accepts any printable id.
const anyTenantID = `^.+$`

// schemaEnv is a fresh database loaded with one schema, and a running
// plugin to erase tenants from it.
type schemaEnv struct {
	name string // the database
	dsn  string
	db   *sql.DB
	d    sdk.TenantDeleter
}

// openDB connects to dsn with multi-statement scripts allowed.
func openDB(t testing.TB, dsn string) *sql.DB {
	cfg, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	cfg.MultiStatements = true
	conn, err := mysql.NewConnector(cfg)
	require.NoError(t, err)
	db := sql.OpenDB(conn)
	t.Cleanup(func() { db.Close() })
	return db
}

// numbers is a table of 1..10000 for schemas to seed from (MySQL has no
// generate_series, and recursive queries stop at 1000 rows by default).
const numbers = `CREATE TABLE nums (n INT PRIMARY KEY);
INSERT INTO nums SELECT 1 + a.d + 10 * b.d + 100 * c.d + 1000 * e.d FROM
	(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) a,
	(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) b,
	(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) c,
	(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) e;
`

func newSchemaEnv(t *testing.T, ddl string) *schemaEnv {
	t.Helper()
	name, dsn := testsvc.MySQLDatabase(t)
	db := openDB(t, dsn)
	_, err := db.ExecContext(testsvc.Context(t, time.Minute), numbers+ddl)
	require.NoError(t, err, "load schema")
	p := plugintest.Launch(t, binary(t), sdk.KindTenantDeleter)
	return &schemaEnv{name: name, dsn: dsn, db: db, d: p.Deleter(t)}
}

func (e *schemaEnv) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	_, err := e.db.ExecContext(testsvc.Context(t, time.Minute), q, args...)
	require.NoError(t, err, q)
}

func (e *schemaEnv) count1(t *testing.T, q string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, e.db.QueryRowContext(testsvc.Context(t, time.Minute), q).Scan(&n), q)
	return n
}

// configure applies cfg with the env's DSN filled in, under the most
// permissive format the daemon allows: the deleter's own checks are what
// these tests exercise.
func (e *schemaEnv) configure(t *testing.T, cfg map[string]any) (*sdk.ConfigureResponse, error) {
	t.Helper()
	full := map[string]any{"dsn": e.dsn}
	for k, v := range cfg {
		full[k] = v
	}
	return e.d.Configure(testsvc.Context(t, time.Minute), &sdk.ConfigureRequest{Name: "mysql:test", Config: full, TenantIDFormat: anyTenantID})
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
	require.NoError(t, err, "Verify(%q)", tenant)
	return resp
}

func (e *schemaEnv) delete(t *testing.T, tenant string) (*sdk.DeleteResponse, error) {
	return e.d.Delete(testsvc.Context(t, 5*time.Minute), &sdk.DeleteRequest{TenantID: tenant}, func(int64) {})
}

// rowSet is every row of every table, as text with every byte visible, per
// table ("db.table").
type rowSet map[string][]string

// snapshot reads every row of every base table of the test's database.
func (e *schemaEnv) snapshot(t *testing.T) rowSet {
	t.Helper()
	ctx := testsvc.Context(t, time.Minute)
	rs, err := e.db.QueryContext(ctx, `SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_TYPE = 'BASE TABLE'`, e.name)
	require.NoError(t, err)
	var tables []string
	for rs.Next() {
		var n string
		require.NoError(t, rs.Scan(&n))
		tables = append(tables, n)
	}
	require.NoError(t, rs.Err())
	rs.Close()
	out := rowSet{}
	for _, tb := range tables {
		if tb != "nums" { // the helper table of numbers
			out[e.name+"."+tb] = e.rowsWhere(t, tb, "TRUE")
		}
	}
	return out
}

// rowsWhere returns the rows of table (in the test's database) matching
// pred (over alias x), each as its values quoted.
func (e *schemaEnv) rowsWhere(t *testing.T, table, pred string) []string {
	t.Helper()
	return e.rowsIn(t, e.name, table, pred)
}

// rowsIn is rowsWhere for a table of any database.
func (e *schemaEnv) rowsIn(t *testing.T, schema, table, pred string) []string {
	t.Helper()
	rs, err := e.db.QueryContext(testsvc.Context(t, time.Minute), fmt.Sprintf("SELECT * FROM %s.%s x WHERE %s", quoteIdent(schema), quoteIdent(table), pred))
	require.NoError(t, err, "%s where %s", table, pred)
	defer rs.Close()
	colNames, err := rs.Columns()
	require.NoError(t, err)
	texts := []string{}
	for rs.Next() {
		vals := make([]sql.RawBytes, len(colNames))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, rs.Scan(ptrs...))
		parts := make([]string, len(vals))
		for i, v := range vals {
			if v == nil {
				parts[i] = "NULL"
			} else {
				parts[i] = fmt.Sprintf("%q", string(v))
			}
		}
		texts = append(texts, strings.Join(parts, " "))
	}
	require.NoError(t, rs.Err())
	sort.Strings(texts)
	return texts
}

// victimRows names, per table, the rows a deletion must remove (a SQL
// predicate over alias x); everything else must stay byte for byte. A table
// is named alone (in the test's database) or as "database|table".
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
		schema := e.name
		if db, tb, ok := strings.Cut(table, "|"); ok {
			schema, table = db, tb
			before[schema+"."+table] = e.rowsIn(t, schema, table, "TRUE")
			want[schema+"."+table] = before[schema+"."+table]
		}
		v := e.rowsIn(t, schema, table, pred)
		require.NotEmpty(t, v, "the test seeds victim rows in %s", table)
		full := schema + "." + table
		want[full] = minus(want[full], v)
		gone[full] = int64(len(v))
		total += int64(len(v))
	}
	c, err := e.count(t, tenant)
	require.NoError(t, err, "Count(%q)", tenant)
	require.Equal(t, total, c.Count, "Count(%q) before deleting", tenant)
	require.Equal(t, gone, nonZero(c.Breakdown), "Count(%q) breakdown", tenant)

	resp, err := e.delete(t, tenant)
	require.NoError(t, err, "Delete(%q)", tenant)
	after := e.snapshot(t)
	for table := range before {
		if _, ok := after[table]; !ok { // another database's
			schema, name, _ := strings.Cut(table, ".")
			after[table] = e.rowsIn(t, schema, name, "TRUE")
		}
		require.Equal(t, want[table], after[table], "rows of %s after erasing %q: only the victim rows may go", table, tenant)
	}
	require.Equal(t, total, resp.DeletedCount, "reported deleted count")
	require.Equal(t, gone, nonZero(resp.Breakdown), "reported breakdown")

	require.NotEmpty(t, resp.Proof, "Delete reports its proof")
	require.Zero(t, sdk.ProofLeft(resp.Proof), "Delete's proof: %+v", resp.Proof)
	v := e.verify(t, tenant)
	require.Zero(t, v.Left(), "the independent proof after deleting: %+v", v.Checks)

	c, err = e.count(t, tenant)
	require.NoError(t, err)
	require.Zero(t, c.Count, "Count(%q) after deleting", tenant)
	again, err := e.delete(t, tenant)
	require.NoError(t, err, "second Delete(%q)", tenant)
	require.Zero(t, again.DeletedCount)
	return resp
}

// expectRefused checks that Delete and Count of tenant fail permanently with
// a message containing every fragment, and that nothing changed.
func (e *schemaEnv) expectRefused(t *testing.T, tenant string, fragments ...string) error {
	t.Helper()
	before := e.snapshot(t)
	_, err := e.delete(t, tenant)
	require.Error(t, err, "Delete(%q) must be refused", tenant)
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err), "%v", err)
	deleted, _ := sdk.DeletedBefore(err)
	require.Zero(t, deleted, "a refusal deletes nothing")
	for _, f := range fragments {
		require.Contains(t, err.Error(), f)
	}
	require.Equal(t, before, e.snapshot(t), "a refused Delete changes nothing")
	_, cerr := e.count(t, tenant)
	require.Error(t, cerr, "Count(%q) reports the same problem", tenant)
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
