package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/seed001"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest"
)

func setupDB(t testing.TB, tenantType string) (string, *pgxpool.Pool) {
	dsn := testsvc.PGDatabase(t)
	ctx := testsvc.Context(t, 2*time.Minute)
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, seed001.WorkflowSchema(tenantType))
	require.NoError(t, err)
	return dsn, pool
}

type fixture struct {
	dsn  string // the plugin's: through proxy when there is one
	pool *pgxpool.Pool
	// proxy stands between the plugin and the server, so the kit can take
	// the database away (StoreOutage) without stopping the shared server.
	proxy *plugintest.Proxy
}

// kitFixture routes the plugin through a proxy, with a password in its DSN
// (trust authentication ignores it; the kit checks it never shows).
func kitFixture(t testing.TB, dsn string, pool *pgxpool.Pool) *fixture {
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	proxy := plugintest.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	u.User = url.UserPassword(u.User.Username(), "kit-pw-s3cret-7319")
	return &fixture{dsn: u.String(), pool: pool, proxy: proxy}
}

func (f *fixture) Config(testing.TB) map[string]any {
	return map[string]any{"dsn": f.dsn, "tables": []any{"workflow_steps", "workflow_instances", "workflow_definitions"}, "batch_size": 1000}
}

func (f *fixture) StopStore(testing.TB)    { f.proxy.Stop() }
func (f *fixture) StartStore(t testing.TB) { f.proxy.Start(t) }

// Settle waits until no other session of the test's database runs a
// statement or holds a transaction open: the plugin's statement that the
// outage cut off goes on in its server session, and commits, until the
// server notices its client is gone.
func (f *fixture) Settle(t testing.TB) {
	testsvc.Eventually(t, time.Minute, func() bool {
		var busy int
		err := f.pool.QueryRow(testsvc.Context(t, 30*time.Second), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
				AND state IS DISTINCT FROM 'idle'`).Scan(&busy)
		require.NoError(t, err)
		return busy == 0
	}, "the plugin's sessions cut off by the outage ended")
}

// UnreachableConfig points at a port nothing listens on.
func (f *fixture) UnreachableConfig(t testing.TB) (map[string]any, string) {
	cfg := f.Config(t)
	cfg["dsn"] = fmt.Sprintf("postgres://app:unreachable-pw-7731@127.0.0.1:%d/app", testsvc.FreePort(t))
	return cfg, "dsn"
}

// Seed creates n instances, n steps and one definition per 10 instances.
// The kit's cancellation checks seed 30,000 instances in one statement,
// which once took over a minute in CI on two cores shared with every other
// package: three minutes leave room.
func (f *fixture) Seed(t testing.TB, tenant string, n int) int64 {
	rows, err := seed001.SeedWorkflows(testsvc.Context(t, 3*time.Minute), f.pool, tenant, n)
	require.NoError(t, err)
	return rows
}

// Checksum hashes every row of the tenant in the three tables.
func (f *fixture) Checksum(t testing.TB, tenant string) string {
	var sum string
	err := f.pool.QueryRow(testsvc.Context(t, time.Minute), `SELECT md5(
		coalesce((SELECT string_agg(x::text, '|' ORDER BY x::text) FROM workflow_steps x WHERE tenant_id = $1), '') || '#' ||
		coalesce((SELECT string_agg(x::text, '|' ORDER BY x::text) FROM workflow_instances x WHERE tenant_id = $1), '') || '#' ||
		coalesce((SELECT string_agg(x::text, '|' ORDER BY x::text) FROM workflow_definitions x WHERE tenant_id = $1), ''))`, tenant).Scan(&sum)
	require.NoError(t, err)
	return sum
}

// StoresDistinct: a text column keeps every valid UTF-8 id apart from every
// other, byte for byte (no NUL: PostgreSQL text cannot hold it).
func (f *fixture) StoresDistinct(id string) bool {
	return utf8.ValidString(id) && !strings.ContainsRune(id, 0)
}

func (f *fixture) Remaining(t testing.TB, tenant string) int64 {
	var n int64
	err := f.pool.QueryRow(testsvc.Context(t, time.Minute), `SELECT
		(SELECT count(*) FROM workflow_steps WHERE tenant_id = $1) +
		(SELECT count(*) FROM workflow_instances WHERE tenant_id = $1) +
		(SELECT count(*) FROM workflow_definitions WHERE tenant_id = $1)`, tenant).Scan(&n)
	require.NoError(t, err)
	return n
}

func binary(t testing.TB) string { return testsvc.Binary(t, "lifecycled-plugin-postgres") }

func TestConformance(t *testing.T) {
	t.Parallel()
	t.Run("uuid", func(t *testing.T) { conformance(t, "") })
	t.Run("permissive", func(t *testing.T) { conformance(t, `^[A-Za-z0-9:._/ +-]{1,64}$`) })
}

func conformance(t *testing.T, format string) {
	dsn, pool := setupDB(t, "text")
	plugintest.RunTenantDeleter(t, plugintest.DeleterOptions{
		Binary:         binary(t),
		TenantIDFormat: format,
		Fixture:        kitFixture(t, dsn, pool),
		BadConfigFields: map[string]string{
			"missing dsn": "dsn", "no tables": "tables", "tables and discover": "tables", "unknown table": "tables",
			"parent first": "tables", "missing column": "tables", "bad batch": "batch_size", "unknown key": "tabels",
		},
		BadConfigs: map[string]map[string]any{
			"missing dsn":         {"tables": []any{"workflow_steps"}},
			"no tables":           {"dsn": dsn},
			"tables and discover": {"dsn": dsn, "tables": []any{"workflow_steps"}, "discover": true},
			"unknown table":       {"dsn": dsn, "tables": []any{"nope"}},
			"parent first":        {"dsn": dsn, "tables": []any{"workflow_definitions", "workflow_instances", "workflow_steps"}},
			"missing column":      {"dsn": dsn, "tables": []any{"workflow_steps"}, "tenant_column": "org_id"},
			"bad batch":           {"dsn": dsn, "tables": []any{"workflow_steps"}, "batch_size": 0},
			"unknown key":         {"dsn": dsn, "tables": []any{"workflow_steps"}, "tabels": []any{}},
		},
		CancelSeed: 30000,
	})
}

func TestDiscoverOrdersChildFirstAndUUIDColumns(t *testing.T) {
	t.Parallel()
	dsn, pool := setupDB(t, "uuid")
	f := &fixture{dsn: dsn, pool: pool}
	p := plugintest.Launch(t, binary(t), sdk.KindTenantDeleter)
	d := p.Deleter(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := d.Configure(ctx, &sdk.ConfigureRequest{Name: "postgres:workflows", Config: map[string]any{"dsn": dsn, "discover": true, "batch_size": 7}})
	require.NoError(t, err)
	require.Empty(t, resp.Warnings, "every tenant column and FK column is indexed")

	a, b := "1b4e28ba-2ca1-11d2-a6b8-000000000001", "1b4e28ba-2ca1-11d2-a6b8-000000000002"
	na, nb := f.Seed(t, a, 40), f.Seed(t, b, 40)
	c, err := d.Count(ctx, &sdk.CountRequest{TenantID: a})
	require.NoError(t, err)
	require.Equal(t, na, c.Count)
	require.Equal(t, map[string]int64{"public.workflow_steps": 40, "public.workflow_instances": 40, "public.workflow_definitions": 4}, c.Breakdown)

	del, err := d.Delete(ctx, &sdk.DeleteRequest{TenantID: a}, func(int64) {})
	require.NoError(t, err, "discovered order deletes children first, in batches of 7")
	require.Equal(t, na, del.DeletedCount)
	require.Zero(t, f.Remaining(t, a))
	require.Equal(t, nb, f.Remaining(t, b))

	// A tenant id that is not a UUID cannot match a uuid column: a permanent error, nothing deleted.
	_, err = d.Delete(ctx, &sdk.DeleteRequest{TenantID: "' OR '1'='1"}, func(int64) {})
	require.Error(t, err)
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err))
	require.Equal(t, nb, f.Remaining(t, b))
}

func TestDiscoverRejectsCyclesAndWarnsAboutMissingIndexes(t *testing.T) {
	t.Parallel()
	dsn := testsvc.PGDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	defer pool.Close()
	_, err = pool.Exec(ctx, `
		CREATE TABLE a (id int PRIMARY KEY, tenant_id text, b_id int);
		CREATE TABLE b (id int PRIMARY KEY, tenant_id text, a_id int REFERENCES a (id));
		ALTER TABLE a ADD FOREIGN KEY (b_id) REFERENCES b (id);
		CREATE TABLE loose (id int PRIMARY KEY, tenant_id text);
		CREATE TABLE orphan_refs (id int PRIMARY KEY, loose_id int REFERENCES loose (id));`)
	require.NoError(t, err)
	p := plugintest.Launch(t, binary(t), sdk.KindTenantDeleter)
	d := p.Deleter(t)

	_, err = d.Configure(ctx, &sdk.ConfigureRequest{Name: "x", Config: map[string]any{"dsn": dsn, "discover": true}})
	require.ErrorIs(t, err, sdk.ErrInvalidConfig)
	require.Contains(t, err.Error(), "cycle")
	require.Contains(t, err.Error(), "public.a")
	require.Contains(t, err.Error(), "public.b")

	resp, err := d.Configure(ctx, &sdk.ConfigureRequest{Name: "x", Config: map[string]any{"dsn": dsn, "tables": []any{"loose"},
		"ignore_tables": []any{"a", "b", "orphan_refs"}}})
	require.NoError(t, err)
	joined := strings.Join(resp.Warnings, "\n")
	require.Contains(t, joined, "has no index leading with tenant_id")
	require.Contains(t, joined, "orphan_refs references public.loose")
}

func TestPasswordFromConfigAndScrubbed(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := pgxpool.New(ctx, testsvc.PGAdminDSN())
	require.NoError(t, err)
	defer admin.Close()
	p := plugintest.Launch(t, binary(t), sdk.KindTenantDeleter)
	d := p.Deleter(t)
	port := testsvc.FreePort(t) // nothing listens: a retryable connect error
	_, err = d.Configure(ctx, &sdk.ConfigureRequest{Name: "x", Config: map[string]any{
		"dsn": fmt.Sprintf("postgres://app:dsn-pa55word@127.0.0.1:%d/app", port), "password": "s3cr3t-from-file", "tables": []any{"t"}}})
	require.Error(t, err)
	require.Equal(t, sdk.ClassRetryable, sdk.ClassOf(err), "%v", err)
	require.NotContains(t, err.Error(), "dsn-pa55word")
	require.NotContains(t, err.Error(), "s3cr3t-from-file")
}

// TestStoreDownMidDeleteIsPartialAndRetryable takes the database away from
// the plugin in the middle of a Delete, at a point the test chooses: a lock
// lets the plugin delete every step but holds its first delete of
// instances, and the plugin's connections are terminated while it waits.
func TestStoreDownMidDeleteIsPartialAndRetryable(t *testing.T) {
	t.Parallel()
	dsn, pool := setupDB(t, "text")
	f := &fixture{dsn: dsn, pool: pool}
	p := plugintest.Launch(t, binary(t), sdk.KindTenantDeleter)
	d := p.Deleter(t)
	ctx := testsvc.Context(t, 2*time.Minute)
	_, err := d.Configure(ctx, &sdk.ConfigureRequest{Name: "x", Config: map[string]any{"dsn": dsn,
		"tables": []any{"workflow_steps", "workflow_instances", "workflow_definitions"}, "batch_size": 100, "lock_timeout": "2m"},
		TenantIDFormat: anyTenantID})
	require.NoError(t, err)
	seeded := f.Seed(t, "victim", 2000)
	f.Seed(t, "bystander", 50)
	bystanders := f.Checksum(t, "bystander")
	var steps int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM workflow_steps WHERE tenant_id = 'victim'`).Scan(&steps))

	// SHARE lets the plugin read every table, but not delete from this one.
	lock, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = lock.Rollback(ctx) }()
	_, err = lock.Exec(ctx, `LOCK TABLE workflow_instances IN SHARE MODE`)
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		_, err := d.Delete(ctx, &sdk.DeleteRequest{TenantID: "victim"}, func(int64) {})
		done <- err
	}()
	const plugin = `application_name = 'lifecycled-plugin-postgres' AND datname = current_database()`
	testsvc.Eventually(t, time.Minute, func() bool {
		var waiting int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE `+plugin+` AND wait_event_type = 'Lock'`).Scan(&waiting)
		return err == nil && waiting > 0
	}, "the plugin waits for the lock on workflow_instances")
	_, err = pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE `+plugin)
	require.NoError(t, err)
	select {
	case err = <-done:
	case <-ctx.Done():
		t.Fatal("Delete did not return after its connections were terminated")
	}
	require.NoError(t, lock.Rollback(ctx))

	require.Error(t, err, "the store went away mid-delete")
	require.Equal(t, sdk.ClassRetryable, sdk.ClassOf(err), "%v", err)
	deleted, ok := sdk.DeletedBefore(err)
	require.True(t, ok)
	require.Equal(t, steps, deleted, "every step, and nothing after them")
	remaining := f.Remaining(t, "victim")
	require.Equal(t, seeded, deleted+remaining, "the partial count is exact")

	// The next attempt finishes the job.
	resp, err := d.Delete(ctx, &sdk.DeleteRequest{TenantID: "victim"}, func(int64) {})
	require.NoError(t, err)
	require.Equal(t, remaining, resp.DeletedCount)
	require.Zero(t, f.Remaining(t, "victim"))
	require.Equal(t, bystanders, f.Checksum(t, "bystander"), "another tenant's rows are untouched")
}
