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
	return e.d.(sdk.Planner).Plan(testsvc.Context(t, time.Minute), &sdk.PlanRequest{TenantID: tenant})
}

func (e *schemaEnv) mustPlan(t *testing.T, tenant string) *sdk.PlanResponse {
	t.Helper()
	p, err := e.plan(t, tenant)
	require.NoError(t, err, "Plan(%q)", tenant)
	return p
}

const mysqlPlanShop = `
CREATE TABLE orders (id INT PRIMARY KEY, tenant_id VARCHAR(40) NOT NULL, KEY (tenant_id));
CREATE TABLE order_lines (id INT PRIMARY KEY, order_id INT NOT NULL, qty INT, FOREIGN KEY (order_id) REFERENCES orders (id));
CREATE TABLE comments (id INT PRIMARY KEY, tenant_id VARCHAR(40) NOT NULL, order_id INT, KEY (tenant_id),
	CONSTRAINT comments_order FOREIGN KEY (order_id) REFERENCES orders (id) ON DELETE CASCADE);
INSERT INTO orders SELECT n, IF(n <= 3, 'Acme', 'acme') FROM nums WHERE n <= 8;
INSERT INTO order_lines SELECT n, 1 + n % 8, n FROM nums WHERE n <= 40;
INSERT INTO comments SELECT n, IF(1 + n % 8 <= 3, 'Acme', 'acme'), 1 + n % 8 FROM nums WHERE n <= 16;
`

func TestMySQLPlanListsEveryTableWithExactCounts(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, mysqlPlanShop)
	_, err := e.plan(t, "Acme")
	require.ErrorIs(t, err, sdk.ErrUnavailable, "Plan before Configure")
	e.mustConfigure(t, map[string]any{"tables": []any{"order_lines", "orders"}, "batch_size": 7})
	db := e.name
	want := map[string]int64{
		"order_lines": e.count1(t, `SELECT COUNT(*) FROM order_lines WHERE order_id IN (SELECT id FROM orders WHERE tenant_id = BINARY 'Acme')`),
		"orders":      e.count1(t, `SELECT COUNT(*) FROM orders WHERE tenant_id = BINARY 'Acme'`),
		"comments":    e.count1(t, `SELECT COUNT(*) FROM comments WHERE tenant_id = BINARY 'Acme'`),
	}
	for k, v := range want {
		require.NotZero(t, v, "the test seeds %s", k)
	}
	before := e.snapshot(t)
	p := e.mustPlan(t, "Acme")
	require.Equal(t, before, e.snapshot(t), "Plan changes nothing")
	require.ElementsMatch(t, []sdk.PlanStep{
		{Target: db + ".order_lines", Via: "FK " + db + ".order_lines.order_id -> " + db + ".orders", Expected: want["order_lines"]},
		{Target: db + ".comments", Via: "reached by ON DELETE CASCADE of FK " + db + ".comments.order_id -> " + db + ".orders, deleted first by tenant column tenant_id", Expected: want["comments"]},
		{Target: db + ".orders", Via: "tenant column tenant_id", Expected: want["orders"]},
	}, p.Steps)
	require.Equal(t, db+".orders", p.Steps[len(p.Steps)-1].Target, "the parent goes last")
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, p.Fingerprint)
	c, err := e.count(t, "Acme")
	require.NoError(t, err)
	require.Equal(t, c.Count, p.Total())
	for _, s := range p.Steps {
		require.Equal(t, c.Breakdown[s.Target], s.Expected, s.Target)
	}

	// Another tenant (same letters, other case: byte for byte another id):
	// same fingerprint, its own counts.
	other := e.mustPlan(t, "acme")
	require.Equal(t, p.Fingerprint, other.Fingerprint)
	require.Equal(t, e.count1(t, `SELECT COUNT(*) FROM orders WHERE tenant_id = BINARY 'acme'`), other.Steps[len(other.Steps)-1].Expected)
	require.Equal(t, p, e.mustPlan(t, "Acme"), "stable across calls")
	require.Zero(t, e.mustPlan(t, "Acme%").Total(), "a LIKE wildcard is data")

	// Tuning leaves the fingerprint; a changed key does not.
	e.mustConfigure(t, map[string]any{"tables": []any{"order_lines", "orders"}, "batch_size": 2})
	require.Equal(t, p.Fingerprint, e.mustPlan(t, "Acme").Fingerprint)
	e.exec(t, `ALTER TABLE comments DROP FOREIGN KEY comments_order`)
	e.exec(t, `ALTER TABLE comments ADD CONSTRAINT comments_order FOREIGN KEY (order_id) REFERENCES orders (id) ON DELETE SET NULL`)
	_, err = e.plan(t, "Acme")
	require.Error(t, err, "SET NULL into a table this deleter does not delete: refused as Delete would")
	require.Contains(t, err.Error(), "comments_order")
	e.exec(t, `ALTER TABLE comments DROP FOREIGN KEY comments_order`)
	e.exec(t, `ALTER TABLE comments ADD CONSTRAINT comments_order FOREIGN KEY (order_id) REFERENCES orders (id) ON DELETE CASCADE`)
	require.Equal(t, p.Fingerprint, e.mustPlan(t, "Acme").Fingerprint, "the same schema again")
	e.exec(t, `ALTER TABLE orders MODIFY tenant_id VARCHAR(60) NOT NULL`)
	require.NotEqual(t, p.Fingerprint, e.mustPlan(t, "Acme").Fingerprint, "the tenant column's type changed")
	e.exec(t, `ALTER TABLE orders MODIFY tenant_id VARCHAR(40) NOT NULL`)
	require.Equal(t, p.Fingerprint, e.mustPlan(t, "Acme").Fingerprint)

	e.expectErased(t, "Acme", victimRows{
		"order_lines": "x.order_id IN (SELECT id FROM orders WHERE tenant_id = BINARY 'Acme')",
		"orders":      "x.tenant_id = BINARY 'Acme'",
		"comments":    "x.tenant_id = BINARY 'Acme'",
	})
	after := e.mustPlan(t, "Acme")
	require.Zero(t, after.Total())
	require.Equal(t, p.Fingerprint, after.Fingerprint)
}
