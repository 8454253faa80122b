package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest"
)

// workflows is the kit's schema: three tables keyed by tenant, in the
// collation MySQL applications most often have, which ignores case,
// accents and trailing spaces.
const workflows = `
CREATE TABLE workflow_definitions (id BIGINT AUTO_INCREMENT PRIMARY KEY, tenant_id VARCHAR(255) NOT NULL, name TEXT,
	KEY (tenant_id)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE workflow_instances (id BIGINT AUTO_INCREMENT PRIMARY KEY, tenant_id VARCHAR(255) NOT NULL, definition_id BIGINT NOT NULL,
	state VARCHAR(20), KEY (tenant_id), FOREIGN KEY (definition_id) REFERENCES workflow_definitions (id)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
CREATE TABLE workflow_steps (id BIGINT AUTO_INCREMENT PRIMARY KEY, tenant_id VARCHAR(255) NOT NULL, instance_id BIGINT NOT NULL,
	payload TEXT, KEY (tenant_id), FOREIGN KEY (instance_id) REFERENCES workflow_instances (id)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
`

var workflowTables = []any{"workflow_steps", "workflow_instances", "workflow_definitions"}

// fixture seeds and reads the workflow tables as the deleter's user does not:
// with the admin's connection, comparing tenant ids byte for byte.
type fixture struct {
	db    *sql.DB
	dsn   string // the plugin's: its own user and password, through proxy
	proxy *plugintest.Proxy
}

func newFixture(t *testing.T) *fixture {
	name, adminDSN := testsvc.MySQLDatabase(t)
	db := openDB(t, adminDSN)
	_, err := db.ExecContext(testsvc.Context(t, time.Minute), workflows)
	require.NoError(t, err)
	cfg, err := mysql.ParseDSN(testsvc.MySQLUser(t, name, "kit-mysql-pw-5512"))
	require.NoError(t, err)
	proxy := plugintest.NewProxy(t, cfg.Addr)
	cfg.Addr = proxy.Addr()
	return &fixture{db: db, dsn: cfg.FormatDSN(), proxy: proxy}
}

// user is the deleter's MySQL user.
func (f *fixture) user(t testing.TB) string {
	cfg, err := mysql.ParseDSN(f.dsn)
	require.NoError(t, err)
	return cfg.User
}

// newSchemaEnvFor starts the plugin configured with the fixture's config
// (no proxy in between is needed: the fixture's proxy just forwards).
func newSchemaEnvFor(t *testing.T, f *fixture) sdk.TenantDeleter {
	d := plugintest.Launch(t, binary(t), sdk.KindTenantDeleter).Deleter(t)
	cfg := f.Config(t)
	cfg["batch_size"] = 500
	_, err := d.Configure(testsvc.Context(t, time.Minute), &sdk.ConfigureRequest{Name: "mysql:workflows", Config: cfg, TenantIDFormat: anyTenantID})
	require.NoError(t, err)
	return d
}

func (f *fixture) Config(testing.TB) map[string]any {
	return map[string]any{"dsn": f.dsn, "tables": workflowTables, "batch_size": 1000}
}

func (f *fixture) StopStore(testing.TB)    { f.proxy.Stop() }
func (f *fixture) StartStore(t testing.TB) { f.proxy.Start(t) }

// Settle waits until no session of the plugin's user runs a statement:
// the one the outage cut off goes on in its server session, and commits,
// until the server notices its client is gone.
func (f *fixture) Settle(t testing.TB) {
	user := f.user(t)
	testsvc.Eventually(t, time.Minute, func() bool {
		var busy int
		err := f.db.QueryRowContext(testsvc.Context(t, 30*time.Second), `SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE USER = ? AND COMMAND <> 'Sleep'`, user).Scan(&busy)
		require.NoError(t, err)
		return busy == 0
	}, "the plugin's sessions cut off by the outage ended")
}

// UnreachableConfig points at a port nothing listens on.
func (f *fixture) UnreachableConfig(t testing.TB) (map[string]any, string) {
	cfg := f.Config(t)
	cfg["dsn"] = fmt.Sprintf("app:unreachable-pw-2231@tcp(127.0.0.1:%d)/app", testsvc.FreePort(t))
	return cfg, "dsn"
}

// Seed creates n instances, n steps and one definition per 10 instances.
func (f *fixture) Seed(t testing.TB, tenant string, n int) int64 {
	ctx := context.Background()
	tx, err := f.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer tx.Rollback()
	defs := (n + 9) / 10
	var defIDs []int64
	for i := 0; i < defs; i++ {
		res, err := tx.ExecContext(ctx, `INSERT INTO workflow_definitions (tenant_id, name) VALUES (?, ?)`, tenant, fmt.Sprintf("def %d", i))
		require.NoError(t, err)
		id, _ := res.LastInsertId()
		defIDs = append(defIDs, id)
	}
	for start := 0; start < n; start += 500 {
		end := min(start+500, n)
		var q strings.Builder
		var args []any
		q.WriteString(`INSERT INTO workflow_instances (tenant_id, definition_id, state) VALUES `)
		for i := start; i < end; i++ {
			if i > start {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, 'done')")
			args = append(args, tenant, defIDs[i%defs])
		}
		res, err := tx.ExecContext(ctx, q.String(), args...)
		require.NoError(t, err)
		first, _ := res.LastInsertId() // the first id of a multi-row insert
		q.Reset()
		args = args[:0]
		q.WriteString(`INSERT INTO workflow_steps (tenant_id, instance_id, payload) VALUES `)
		for i := start; i < end; i++ {
			if i > start {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?)")
			args = append(args, tenant, first+int64(i-start), fmt.Sprintf("step of %q", tenant))
		}
		_, err = tx.ExecContext(ctx, q.String(), args...)
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit())
	return int64(2*n + defs)
}

// exact is the tenant match the fixture reads with: byte for byte.
const exact = "CAST(tenant_id AS BINARY) = CAST(? AS BINARY)"

func (f *fixture) Remaining(t testing.TB, tenant string) int64 {
	var n int64
	err := f.db.QueryRowContext(context.Background(), `SELECT
		(SELECT COUNT(*) FROM workflow_steps WHERE `+exact+`) +
		(SELECT COUNT(*) FROM workflow_instances WHERE `+exact+`) +
		(SELECT COUNT(*) FROM workflow_definitions WHERE `+exact+`)`, tenant, tenant, tenant).Scan(&n)
	require.NoError(t, err)
	return n
}

// Checksum hashes every row of the tenant in the three tables.
func (f *fixture) Checksum(t testing.TB, tenant string) string {
	h := sha256.New()
	for _, q := range []string{
		`SELECT CONCAT_WS('|', id, HEX(tenant_id), HEX(name)) FROM workflow_definitions WHERE ` + exact + ` ORDER BY id`,
		`SELECT CONCAT_WS('|', id, HEX(tenant_id), definition_id, state) FROM workflow_instances WHERE ` + exact + ` ORDER BY id`,
		`SELECT CONCAT_WS('|', id, HEX(tenant_id), instance_id, HEX(payload)) FROM workflow_steps WHERE ` + exact + ` ORDER BY id`,
	} {
		rs, err := f.db.QueryContext(context.Background(), q, tenant)
		require.NoError(t, err)
		for rs.Next() {
			var s string
			require.NoError(t, rs.Scan(&s))
			fmt.Fprintln(h, s)
		}
		require.NoError(t, rs.Err())
		rs.Close()
		fmt.Fprintln(h, "#")
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestConformance(t *testing.T) {
	// Under the default UUID format, and under one that accepts nearly
	// anything, so that the kit seeds bystanders that differ from a tenant
	// only in case, accents, Unicode form or trailing spaces: the ids
	// utf8mb4_general_ci takes for it.
	for name, format := range map[string]string{"uuid": "uuid", "permissive": `^.{1,200}$`} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			plugintest.RunTenantDeleter(t, plugintest.DeleterOptions{
				Binary:         binary(t),
				TenantIDFormat: format,
				Fixture:        f,
				BadConfigs: map[string]map[string]any{
					"missing dsn":         {"tables": []any{"workflow_steps"}},
					"dsn without db":      {"dsn": "app:pw@tcp(127.0.0.1:3306)/", "tables": []any{"workflow_steps"}},
					"no tables":           {"dsn": f.dsn},
					"tables and discover": {"dsn": f.dsn, "tables": []any{"workflow_steps"}, "discover": true},
					"unknown table":       {"dsn": f.dsn, "tables": []any{"nope"}},
					"parent first":        {"dsn": f.dsn, "tables": []any{"workflow_definitions", "workflow_instances", "workflow_steps"}},
					"missing column":      {"dsn": f.dsn, "tables": []any{"workflow_steps"}, "tenant_column": "org_id"},
					"bad batch":           {"dsn": f.dsn, "tables": []any{"workflow_steps"}, "batch_size": 0},
					"bad lock timeout":    {"dsn": f.dsn, "tables": []any{"workflow_steps"}, "lock_timeout": "10ms"},
					"unknown key":         {"dsn": f.dsn, "tables": []any{"workflow_steps"}, "tabels": []any{}},
				},
				BadConfigFields: map[string]string{
					"missing dsn": "dsn", "dsn without db": "dsn", "no tables": "tables", "tables and discover": "tables",
					"unknown table": "tables", "parent first": "tables", "missing column": "tables", "bad batch": "batch_size",
					"bad lock timeout": "lock_timeout", "unknown key": "tabels",
				},
				CancelSeed: 20000,
			})
		})
	}
}

func TestPasswordNeverLeaves(t *testing.T) {
	p := plugintest.Launch(t, binary(t), sdk.KindTenantDeleter)
	d := p.Deleter(t)
	ctx := testsvc.Context(t, time.Minute)
	port := testsvc.FreePort(t)
	_, err := d.Configure(ctx, &sdk.ConfigureRequest{Name: "x", Config: map[string]any{
		"dsn": fmt.Sprintf("app:dsn-pa55word@tcp(127.0.0.1:%d)/app", port), "password": "s3cr3t-from-file", "tables": []any{"t"}}})
	require.Error(t, err)
	require.Equal(t, sdk.ClassRetryable, sdk.ClassOf(err), "%v", err)
	require.Contains(t, err.Error(), "dsn")
	require.NotContains(t, err.Error(), "dsn-pa55word")
	require.NotContains(t, err.Error(), "s3cr3t-from-file")

	// A wrong password is permanent: retrying cannot fix it.
	name, _ := testsvc.MySQLDatabase(t)
	dsn := testsvc.MySQLUser(t, name, "right-pw-991")
	cfg, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	_, err = d.Configure(ctx, &sdk.ConfigureRequest{Name: "x", Config: map[string]any{"dsn": dsn, "password": "wrong-pw-117", "tables": []any{"t"}}})
	require.Error(t, err)
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err), "%v", err)
	require.Contains(t, err.Error(), "Access denied")
	require.NotContains(t, err.Error(), "wrong-pw-117")
	require.NotContains(t, p.Stderr(), "wrong-pw-117")
	require.NotContains(t, p.Stderr(), cfg.Passwd)
}
