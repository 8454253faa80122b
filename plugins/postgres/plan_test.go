package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

func (e *schemaEnv) plan(t *testing.T, tenant string) (*sdk.PlanResponse, error) {
	t.Helper()
	p, ok := e.d.(sdk.Planner)
	require.True(t, ok, "the daemon's client is a Planner")
	return p.Plan(testsvc.Context(t, time.Minute), &sdk.PlanRequest{TenantID: tenant})
}

func (e *schemaEnv) mustPlan(t *testing.T, tenant string) *sdk.PlanResponse {
	t.Helper()
	p, err := e.plan(t, tenant)
	require.NoError(t, err, "Plan(%s)", tenant)
	return p
}

// planShop: orders carry the tenant column, their lines hang off them by
// key, comments go by ON DELETE CASCADE (not listed), events are
// partitioned.
const planShop = `
CREATE TABLE orders (id int PRIMARY KEY, tenant_id text NOT NULL);
CREATE TABLE order_lines (id int PRIMARY KEY, order_id int NOT NULL REFERENCES orders (id), qty int);
CREATE TABLE comments (id int PRIMARY KEY, tenant_id text NOT NULL, order_id int REFERENCES orders (id) ON DELETE CASCADE);
CREATE TABLE events (id int, tenant_id text NOT NULL, at date NOT NULL) PARTITION BY RANGE (at);
CREATE TABLE events_2024 PARTITION OF events FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
CREATE TABLE events_2025 PARTITION OF events FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
CREATE TABLE currencies (code text PRIMARY KEY);
INSERT INTO orders SELECT g, CASE WHEN g <= 3 THEN 'Acme' ELSE 'acme' END FROM generate_series(1, 8) g;
INSERT INTO order_lines SELECT g, 1 + g % 8, g FROM generate_series(1, 40) g;
INSERT INTO comments SELECT g, CASE WHEN g % 8 < 3 THEN 'Acme' ELSE 'acme' END, 1 + g % 8 FROM generate_series(0, 15) g;
INSERT INTO events SELECT g, CASE WHEN g % 3 = 0 THEN 'Acme' ELSE 'acme' END, DATE '2024-06-01' + g * 2 FROM generate_series(1, 200) g;
`

func TestPostgresPlanListsEveryTableWithExactCounts(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, planShop)
	e.mustConfigure(t, map[string]any{"tables": []any{"events", "order_lines", "orders"}, "batch_size": 7})
	want := map[string]int64{
		"public.events":      e.count1(t, `SELECT count(*) FROM events WHERE tenant_id = 'Acme'`),
		"public.order_lines": e.count1(t, `SELECT count(*) FROM order_lines WHERE order_id IN (SELECT id FROM orders WHERE tenant_id = 'Acme')`),
		"public.orders":      e.count1(t, `SELECT count(*) FROM orders WHERE tenant_id = 'Acme'`),
		"public.comments":    e.count1(t, `SELECT count(*) FROM comments WHERE tenant_id = 'Acme'`),
	}
	before := e.snapshot(t)
	p := e.mustPlan(t, "Acme")
	require.Equal(t, before, e.snapshot(t), "Plan changes nothing")
	require.Equal(t, []sdk.PlanStep{
		{Target: "public.events", Via: "tenant column tenant_id", Expected: want["public.events"]},
		{Target: "public.order_lines", Via: "FK public.order_lines.order_id -> public.orders", Expected: want["public.order_lines"]},
		{Target: "public.orders", Via: "tenant column tenant_id", Expected: want["public.orders"]},
		{Target: "public.comments", Via: "ON DELETE CASCADE of FK public.comments.order_id -> public.orders, rows with tenant column tenant_id", Expected: want["public.comments"]},
	}, p.Steps)
	for k, v := range want {
		require.NotZero(t, v, "the test seeds %s", k)
	}
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, p.Fingerprint)
	require.Contains(t, p.Notes, "public.events is stored in 2 partitions or child tables, deleted one by one")

	c, err := e.count(t, "Acme")
	require.NoError(t, err)
	require.Equal(t, c.Count, p.Total())

	// The same fingerprint for another tenant (another case of the same
	// letters) and on a second call; its own counts.
	other := e.mustPlan(t, "acme")
	require.Equal(t, p.Fingerprint, other.Fingerprint)
	require.Equal(t, e.count1(t, `SELECT count(*) FROM orders WHERE tenant_id = 'acme'`), other.Steps[2].Expected)
	require.Equal(t, p, e.mustPlan(t, "Acme"))

	// A tenant with nothing plans zeros, same fingerprint.
	none := e.mustPlan(t, "nobody")
	require.Zero(t, none.Total())
	require.Len(t, none.Steps, 4)
	require.Equal(t, p.Fingerprint, none.Fingerprint)

	e.expectErased(t, "Acme", victimRows{
		"public.events":      "x.tenant_id = 'Acme'",
		"public.order_lines": "x.order_id IN (SELECT id FROM orders WHERE tenant_id = 'Acme')",
		"public.orders":      "x.tenant_id = 'Acme'",
		"public.comments":    "x.tenant_id = 'Acme'",
	})
	after := e.mustPlan(t, "Acme")
	require.Zero(t, after.Total())
	require.Equal(t, p.Fingerprint, after.Fingerprint, "counts are not part of the fingerprint")
}

// The fingerprint follows what is deleted and how, not data, partitions or
// tuning; it changes with a key, a tenant column type or the table list.
func TestPostgresPlanFingerprintFollowsTheSchemaOnly(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, planShop)
	cfg := map[string]any{"tables": []any{"events", "order_lines", "orders"}}
	e.mustConfigure(t, cfg)
	base := e.mustPlan(t, "Acme").Fingerprint

	same := func(why string) {
		t.Helper()
		require.Equal(t, base, e.mustPlan(t, "Acme").Fingerprint, why)
	}
	e.exec(t, `INSERT INTO orders VALUES (100, 'Acme')`)
	same("a new row")
	e.exec(t, `CREATE TABLE events_2023 PARTITION OF events FOR VALUES FROM ('2023-01-01') TO ('2024-01-01')`)
	same("a new partition")
	e.exec(t, `CREATE INDEX ON order_lines (order_id)`)
	same("a new index")
	e.mustConfigure(t, map[string]any{"tables": cfg["tables"], "batch_size": 3, "lock_timeout": "5s"})
	same("another batch size and lock timeout")

	changed := func(why string) string {
		t.Helper()
		fp := e.mustPlan(t, "Acme").Fingerprint
		require.NotEqual(t, base, fp, why)
		base = fp
		return fp
	}
	e.exec(t, `ALTER TABLE comments DROP CONSTRAINT comments_order_id_fkey, ADD CONSTRAINT comments_order_id_fkey FOREIGN KEY (order_id) REFERENCES orders (id) ON DELETE SET NULL`)
	// comments is no longer reached by a cascade: the drift gate now
	// names it (it has the tenant column), until it is listed.
	_, err := e.plan(t, "Acme")
	require.ErrorIs(t, err, sdk.ErrInvalidConfig)
	require.Contains(t, err.Error(), "public.comments is not in tables but has the tenant column")
	e.mustConfigure(t, map[string]any{"tables": []any{"comments", "events", "order_lines", "orders"}})
	changed("comments listed, its key SET NULL")
	e.exec(t, `ALTER TABLE comments ALTER COLUMN tenant_id TYPE varchar(20)`)
	changed("the tenant column's type")
	e.exec(t, `ALTER TABLE order_lines ADD COLUMN currency text REFERENCES currencies (code)`)
	same("a key from a listed table to a lookup table is not part of the deletion")

	// Discover: a new table with the tenant column joins the plan.
	e.mustConfigure(t, map[string]any{"discover": true})
	disc := e.mustPlan(t, "Acme")
	base = disc.Fingerprint
	e.exec(t, `CREATE TABLE invoices (id int PRIMARY KEY, tenant_id text NOT NULL); INSERT INTO invoices VALUES (1, 'Acme'), (2, 'acme')`)
	grown := e.mustPlan(t, "Acme")
	require.NotEqual(t, disc.Fingerprint, grown.Fingerprint, "discover re-reads the schema for every plan")
	require.Len(t, grown.Steps, len(disc.Steps)+1)
	require.Contains(t, grown.Steps, sdk.PlanStep{Target: "public.invoices", Via: "tenant column tenant_id", Expected: 1})
}

func TestPostgresPlanRefusesWhatDeleteWouldRefuse(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, withAction(postsAndComments, "CASCADE"))
	_, err := e.plan(t, "a")
	require.ErrorIs(t, err, sdk.ErrUnavailable, "Plan before Configure")
	e.mustConfigure(t, map[string]any{"tables": []any{"comments", "posts"}})
	// Tenant b's comment on a's post: Delete would be refused, so is Plan.
	e.exec(t, `UPDATE comments SET post_id = 1 WHERE id = 21`)
	before := e.snapshot(t)
	_, err = e.plan(t, "a")
	require.Error(t, err)
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err))
	require.Contains(t, err.Error(), "comments_post_id_fkey")
	// Bad ids fail as in Count, nothing read or changed.
	_, err = e.plan(t, "")
	require.Error(t, err)
	require.Equal(t, before, e.snapshot(t))
}
