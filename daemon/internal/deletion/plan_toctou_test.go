package deletion_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/adminapi"
	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/migrations"
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest"
)

// hooked passes every call to a real plugin and runs afterPlan after its
// n-th Plan: a schema change at the moment after the runner's plan check,
// before its Delete.
type hooked struct {
	sdk.TenantDeleter
	mu        sync.Mutex
	plans     int
	afterPlan func(n int)
}

func (h *hooked) Plan(ctx context.Context, req *sdk.PlanRequest) (*sdk.PlanResponse, error) {
	p, err := h.TenantDeleter.(sdk.Planner).Plan(ctx, req)
	h.mu.Lock()
	h.plans++
	n := h.plans
	h.mu.Unlock()
	h.afterPlan(n)
	return p, err
}

type oneDeleter struct {
	name string
	d    sdk.TenantDeleter
}

func (o oneDeleter) DeleterNames() []string { return []string{o.name} }
func (o oneDeleter) Deleter(string) (sdk.TenantDeleter, error) {
	return o.d, nil
}

// TestTableAddedAfterThePlanCheckOnRealPostgres: the runner checks the
// plan, then a table with the tenant column is created, then the runner
// calls Delete. With discover = true the postgres plugin took the new
// table in and deleted from it, a table nobody approved (found by an
// outside attack). Now the Delete refuses the checked fingerprint: nothing
// of anyone is deleted, the deleter is BLOCKED naming the table, and the
// retry's plan check sends the job to approval; once approved it erases
// the tenant from every table, the other tenant's rows untouched.
func TestTableAddedAfterThePlanCheckOnRealPostgres(t *testing.T) {
	const other = "11111111-1111-4111-8111-111111111111"
	dsn := testsvc.PGDatabase(t)
	ctx := testsvc.Context(t, 2*time.Minute)
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err, sql)
	}
	exec(`CREATE TABLE accounts (id int PRIMARY KEY, tenant_id text NOT NULL);
		CREATE TABLE notes (id int PRIMARY KEY, tenant_id text NOT NULL, account_id int REFERENCES accounts (id))`)
	exec(`INSERT INTO accounts VALUES (1, $1), (2, $2)`, tenant, other)
	exec(`INSERT INTO notes VALUES (1, $1, 1), (2, $2, 2), (3, $1, 1)`, tenant, other)
	// Every row of a table, as text: what must not change.
	rows := func(table string) []string {
		t.Helper()
		var out []string
		require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(array_agg(x::text ORDER BY x::text), '{}') FROM `+table+` x`).Scan(&out))
		return out
	}

	p := plugintest.Launch(t, testsvc.Binary(t, "lifecycled-plugin-postgres"), sdk.KindTenantDeleter)
	real := p.Deleter(t)
	_, err = real.Configure(ctx, &sdk.ConfigureRequest{Name: "postgres:app", Config: map[string]any{"dsn": dsn, "discover": true}, TenantIDFormat: "uuid"})
	require.NoError(t, err)
	h := &hooked{TenantDeleter: real, afterPlan: func(n int) {
		// 1: the plan the job is created with; 2: the attempt's check.
		if n == 2 {
			exec(`CREATE TABLE invoices (id int PRIMARY KEY, tenant_id text NOT NULL)`)
			exec(`INSERT INTO invoices VALUES (1, $1), (2, $2)`, tenant, other)
		}
	}}
	st := storetest.Open(t, migrations.SQLite)
	svc := run(t, st, oneDeleter{"postgres:app", h}, nil)
	before := map[string][]string{"accounts": rows("accounts"), "notes": rows("notes")}
	_, _, err = svc.StartDeletion(ctx, tenant, deletion.StartOptions{})
	require.NoError(t, err)

	blocked := waitFor(t, st, tenant, func(j *deletion.Job) bool { return j.Status == deletion.JobBlocked }, "the plugin refuses the stale plan")
	d := deleterJSON(adminapi.JobBody(blocked), "postgres:app")
	require.Contains(t, d.Error, "the plan changed between the daemon's plan check and Delete")
	require.Contains(t, d.Error, `new: table "public.invoices"`)
	require.Equal(t, before["accounts"], rows("accounts"), "nothing deleted")
	require.Equal(t, before["notes"], rows("notes"), "nothing deleted")
	require.Equal(t, []string{"(1," + tenant + ")", "(2," + other + ")"}, rows("invoices"), "nothing deleted from the new table")

	_, err = svc.Retry(ctx, tenant)
	require.NoError(t, err)
	waiting := waitFor(t, st, tenant, func(j *deletion.Job) bool { return j.Status == deletion.JobAwaitingApproval }, "the retry's plan check sees the table")
	require.Contains(t, waiting.PlanDrift, "public.invoices")
	plan, err := svc.Plan(ctx, tenant)
	require.NoError(t, err)
	_, err = svc.Approve(ctx, tenant, deletion.ApproveOptions{PlanHash: plan.Hash})
	require.NoError(t, err)
	done := waitFor(t, st, tenant, completed, "job completes")
	require.True(t, done.Verified)
	require.Equal(t, []string{"(2," + other + ")"}, rows("accounts"))
	require.Equal(t, []string{"(2," + other + ",2)"}, rows("notes"))
	require.Equal(t, []string{"(2," + other + ")"}, rows("invoices"))
}
