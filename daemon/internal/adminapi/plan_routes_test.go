package adminapi_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/adminapi"
	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/receipt"
	"github.com/lifecycled/lifecycled/daemon/internal/retry"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

// planningDeleter is recordingDeleter with a plan: one step per table it
// knows, reached as vias says, under a fingerprint of its tables and vias
// (what a real plugin computes from its schema). Adding a table or
// changing a via is what a schema change does to a real plugin's plan.
type planningDeleter struct {
	recordingDeleter
	pmu     sync.Mutex
	vias    map[string]string // table -> how it is reached
	planErr error
	plans   int
}

func (d *planningDeleter) Plan(_ context.Context, req *sdk.PlanRequest) (*sdk.PlanResponse, error) {
	d.pmu.Lock()
	defer d.pmu.Unlock()
	d.plans++
	if d.planErr != nil {
		return nil, d.planErr
	}
	tables := make([]string, 0, len(d.vias))
	for t := range d.vias {
		tables = append(tables, t)
	}
	sort.Strings(tables)
	d.mu.Lock()
	defer d.mu.Unlock()
	resp := &sdk.PlanResponse{Notes: []string{"planned by the test"}}
	var fp strings.Builder
	for _, t := range tables {
		resp.Steps = append(resp.Steps, sdk.PlanStep{Target: t, Via: d.vias[t], Expected: d.items[req.TenantID][t]})
		fmt.Fprintf(&fp, "%s|%s;", t, d.vias[t])
	}
	resp.Fingerprint = "fp:" + fp.String()
	return resp, nil
}

// schemaChange adds a table the tenant has rows in, as a migration of the
// application would.
func (d *planningDeleter) schemaChange(table, via string, rows map[string]int64) {
	d.pmu.Lock()
	d.vias[table] = via
	d.pmu.Unlock()
	d.mu.Lock()
	for tenant, n := range rows {
		d.items[tenant][table] = n
	}
	d.mu.Unlock()
}

func (d *planningDeleter) failPlans(err error) {
	d.pmu.Lock()
	d.planErr = err
	d.pmu.Unlock()
}

type anySet map[string]sdk.TenantDeleter

func (s anySet) DeleterNames() []string {
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (s anySet) Deleter(name string) (sdk.TenantDeleter, error) {
	d, ok := s[name]
	if !ok {
		return nil, fmt.Errorf("no deleter %q", name)
	}
	return d, nil
}

type approvalConfig struct{ require, distinct bool }

// planAPI is the admin API with the erasure, plan and approval routes
// over a real store, a running runner and a notary.
func planAPI(t *testing.T, st store.Store, src deletion.Deleters, cfg approvalConfig) (http.Handler, ed25519.PublicKey) {
	t.Helper()
	log := hclog.NewNullLogger()
	pub, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	notary := receipt.NewNotary(priv, "d1", func() map[string]receipt.Plugin { return map[string]receipt.Plugin{} })
	require.NoError(t, st.RegisterReceiptKey(testsvc.Context(t, time.Minute), deletion.ReceiptKey{ID: receipt.KeyID(pub),
		Algorithm: receipt.Algorithm, PublicKey: pub, RegisteredAt: time.Now()}))
	reg := deletion.NewRegistry(src, func() int { return 2 })
	runner := deletion.NewRunner(st, reg, "d1", func() deletion.RunnerConfig {
		return deletion.RunnerConfig{PollInterval: 20 * time.Millisecond, Lease: time.Second, Verify: true, MaxJobs: 2, Notary: notary,
			RetryPolicy: retry.Policy{Initial: 50 * time.Millisecond, Multiplier: 2, Max: time.Second, Jitter: retry.JitterNone}}
	}, log, nil, nil)
	require.NoError(t, runner.Start(testsvc.Context(t, time.Minute)))
	t.Cleanup(func() { _ = runner.Stop(testsvc.Context(t, time.Minute)) })
	svc := deletion.NewService(st, reg, runner, deletion.ServiceOptions{Notary: notary,
		Config: func() deletion.ServiceConfig {
			return deletion.ServiceConfig{TenantIDFormat: "uuid", RequireApproval: cfg.require, ApproversDistinct: cfg.distinct}
		}})
	srv := adminapi.New(adminapi.Options{
		Logger: log, Policy: func() adminapi.AccessPolicy { return adminapi.AccessPolicy{} },
		Registry: prometheus.NewRegistry(), Gatherer: prometheus.NewRegistry(),
		Routes: []func(*http.ServeMux){adminapi.TenantRoutes(svc), adminapi.DeletionRoutes(svc), adminapi.ReceiptRoutes(svc),
			adminapi.PlanRoutes(svc)},
	})
	return srv.Handler(), pub
}

// sendAs is send with the caller's uid as the socket's peer credentials
// give it; uid < 0 is a caller whose uid is unknown.
func sendAs(t *testing.T, h http.Handler, uid int, method, target string, body any) (int, map[string]any) {
	t.Helper()
	var raw []byte
	if body != nil {
		var err error
		raw, err = json.Marshal(body)
		require.NoError(t, err)
	}
	req := httptest.NewRequest(method, "http://localhost"+target, bytes.NewReader(raw))
	if uid >= 0 {
		req = req.WithContext(adminapi.WithPeer(req.Context(), adminapi.PeerCred{UID: uint32(uid), GID: uint32(uid), PID: 1, Known: true}))
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	return rec.Code, out
}

func errMessage(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	m, _ := e["message"].(string)
	return m
}

// twoTenants is a planner holding tenant a's and bystander b's rows, and
// a deleter that cannot plan, holding theirs too.
func twoTenants(a, b string) (*planningDeleter, *recordingDeleter, anySet) {
	sql := &planningDeleter{
		recordingDeleter: recordingDeleter{items: map[string]map[string]int64{
			a: {"public.orders": 3, "public.order_lines": 7},
			b: {"public.orders": 2, "public.order_lines": 5},
		}},
		vias: map[string]string{"public.orders": "tenant column tenant_id", "public.order_lines": "FK order_lines.order_id -> orders"},
	}
	kv := &recordingDeleter{items: map[string]map[string]int64{a: {"session:{tenant}:*": 2}, b: {"session:{tenant}:*": 4}}}
	return sql, kv, anySet{"postgres:app": sql, "redis:sessions": kv}
}

func TestPlanRoute(t *testing.T) {
	storetest.Each(t, func(t *testing.T, _ context.Context, st store.Store) {
		a, b := uuid.NewString(), uuid.NewString()
		sql, kv, set := twoTenants(a, b)
		h, _ := planAPI(t, st, set, approvalConfig{})
		before := sql.snapshot() + kv.snapshot()

		sc, plan := sendAs(t, h, 1000, "GET", "/api/v1/tenants/"+strings.ToUpper(a)+"/plan", nil)
		require.Equal(t, 200, sc, "%v", plan)
		require.Equal(t, a, plan["tenant_id"])
		require.Equal(t, true, plan["complete"])
		require.Equal(t, 10.0, plan["expected_total"])
		hash, _ := plan["plan_hash"].(string)
		require.Regexp(t, `^sha256:[0-9a-f]{64}$`, hash)
		ds := plan["deleters"].([]any)
		require.Len(t, ds, 2)
		pg := ds[0].(map[string]any)
		require.Equal(t, "postgres:app", pg["name"])
		require.Equal(t, "planned", pg["status"])
		require.Equal(t, 10.0, pg["expected"])
		require.Equal(t, []any{
			map[string]any{"target": "public.order_lines", "via": "FK order_lines.order_id -> orders", "expected": 7.0},
			map[string]any{"target": "public.orders", "via": "tenant column tenant_id", "expected": 3.0},
		}, pg["steps"])
		require.Equal(t, []any{"planned by the test"}, pg["notes"])
		require.NotEmpty(t, pg["fingerprint"])
		redis := ds[1].(map[string]any)
		require.Equal(t, map[string]any{"name": "redis:sessions", "status": "unsupported", "fingerprint": nil, "expected": nil,
			"steps": []any{}, "notes": []any{}}, redis, "a deleter that cannot plan is unsupported, not an error")

		// Another tenant with other counts has the same plan hash: the hash
		// covers the shape, not the counts.
		sc, other := sendAs(t, h, 1000, "GET", "/api/v1/tenants/"+b+"/plan", nil)
		require.Equal(t, 200, sc)
		require.Equal(t, 7.0, other["expected_total"])
		require.Equal(t, hash, other["plan_hash"])

		// A schema change changes it.
		sql.schemaChange("public.invoices", "tenant column tenant_id", map[string]int64{a: 1, b: 1})
		_, changed := sendAs(t, h, 1000, "GET", "/api/v1/tenants/"+a+"/plan", nil)
		require.NotEqual(t, hash, changed["plan_hash"])
		before = sql.snapshot() + kv.snapshot()

		// A deleter that cannot plan now: the plan is incomplete and has
		// no hash.
		sql.failPlans(sdk.Unavailable(fmt.Errorf("dial tcp 127.0.0.1:5432: connection refused")))
		sc, broken := sendAs(t, h, 1000, "GET", "/api/v1/tenants/"+a+"/plan", nil)
		require.Equal(t, 200, sc, "%v", broken)
		require.Equal(t, false, broken["complete"])
		require.Nil(t, broken["plan_hash"])
		pg = broken["deleters"].([]any)[0].(map[string]any)
		require.Equal(t, "failed", pg["status"])
		require.Contains(t, pg["error"], "connection refused")

		sc, bad := sendAs(t, h, 1000, "GET", "/api/v1/tenants/not-a-tenant/plan", nil)
		require.Equal(t, 400, sc)
		require.Equal(t, "SYS_TENANT_VALIDATION_ERROR", code(bad))
		sc, bad = sendAs(t, h, 1000, "GET", "/api/v1/tenants/"+a+"/plan?verbose=1", nil)
		require.Equal(t, 400, sc, "%v", bad)
		require.Equal(t, before, sql.snapshot()+kv.snapshot(), "planning deletes nothing")
	})
}

// TestStalePlanHashIsRefusedAtRequest: a deletion request that names the
// plan its caller read is refused when the plan changed since, and no job
// is created.
func TestStalePlanHashIsRefusedAtRequest(t *testing.T) {
	storetest.Each(t, func(t *testing.T, _ context.Context, st store.Store) {
		a, b := uuid.NewString(), uuid.NewString()
		sql, kv, set := twoTenants(a, b)
		h, _ := planAPI(t, st, set, approvalConfig{})
		_, plan := sendAs(t, h, 1000, "GET", "/api/v1/tenants/"+a+"/plan", nil)
		seen := plan["plan_hash"].(string)
		sql.schemaChange("public.invoices", "tenant column tenant_id", map[string]int64{a: 4, b: 6})
		before := sql.snapshot() + kv.snapshot()

		sc, body := sendAs(t, h, 1000, "POST", "/api/v1/tenants/"+a+"/deletion", map[string]any{"plan_hash": seen})
		require.Equal(t, 409, sc, "%v", body)
		require.Equal(t, "SYS_TENANT_PLAN_CHANGED", code(body))
		require.Contains(t, errMessage(body), "postgres:app: new target public.invoices (via tenant column tenant_id)")
		sc, _ = sendAs(t, h, 1000, "GET", "/api/v1/tenants/"+a+"/deletion", nil)
		require.Equal(t, 404, sc, "no job was created")

		sc, body = sendAs(t, h, 1000, "POST", "/api/v1/deletions", map[string]any{"tenant_ids": []string{a, b}, "plan_hash": seen})
		require.Equal(t, 409, sc, "%v", body)
		require.Equal(t, "SYS_TENANT_PLAN_CHANGED", code(body))

		sc, body = sendAs(t, h, 1000, "POST", "/api/v1/tenants/"+a+"/deletion", map[string]any{"plan_hash": "sha256:abc"})
		require.Equal(t, 400, sc, "%v", body)
		require.Equal(t, "SYS_TENANT_VALIDATION_ERROR", code(body))

		sql.failPlans(sdk.Unavailable(fmt.Errorf("connection refused")))
		sc, body = sendAs(t, h, 1000, "POST", "/api/v1/tenants/"+a+"/deletion", map[string]any{"plan_hash": seen})
		require.Equal(t, 409, sc, "%v", body)
		require.Equal(t, "SYS_TENANT_PLAN_INCOMPLETE", code(body))
		sc, _ = sendAs(t, h, 1000, "GET", "/api/v1/deletions", nil)
		require.Equal(t, 200, sc)
		_, page := sendAs(t, h, 1000, "GET", "/api/v1/deletions", nil)
		require.Empty(t, page["jobs"])
		time.Sleep(200 * time.Millisecond) // a runner poll or ten
		require.Equal(t, before, sql.snapshot()+kv.snapshot(), "nothing was deleted")

		// With the hash read now, the request is taken and the job is held
		// to that plan.
		sql.failPlans(nil)
		_, plan = sendAs(t, h, 1000, "GET", "/api/v1/tenants/"+a+"/plan", nil)
		sc, job := sendAs(t, h, 1000, "POST", "/api/v1/tenants/"+a+"/deletion", map[string]any{"plan_hash": plan["plan_hash"]})
		require.Equal(t, 202, sc, "%v", job)
		require.Equal(t, plan["plan_hash"], job["plan_hash"])
		waitStatus(t, h, a, "COMPLETED")
		require.Contains(t, sql.snapshot(), fmt.Sprintf(`%q:{"public.invoices":6,"public.order_lines":5,"public.orders":2}`, b), "bystander untouched")
	})
}

func waitStatus(t *testing.T, h http.Handler, tenant, status string) map[string]any {
	t.Helper()
	var job map[string]any
	testsvc.Eventually(t, 20*time.Second, func() bool {
		_, job = sendAs(t, h, 1000, "GET", "/api/v1/tenants/"+tenant+"/deletion", nil)
		return job["status"] == status
	}, "job of %s becomes %s (last: %v)", tenant, status, job)
	return job
}
