package adminapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/adminapi"
	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/retry"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/migrations"
	"github.com/lifecycled/lifecycled/sdk"
)

// recordingDeleter is an in-memory store behind the sdk interface that
// remembers every tenant id it was called with: what a plugin receives is
// what these tests are about.
type recordingDeleter struct {
	mu    sync.Mutex
	items map[string]map[string]int64 // tenant -> table -> items
	seen  []string
}

func (d *recordingDeleter) Configure(context.Context, *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	return &sdk.ConfigureResponse{}, nil
}

func (d *recordingDeleter) Count(_ context.Context, req *sdk.CountRequest) (*sdk.CountResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seen = append(d.seen, req.TenantID)
	resp := &sdk.CountResponse{Breakdown: map[string]int64{}}
	for table, n := range d.items[req.TenantID] {
		resp.Breakdown[table] = n
		resp.Count += n
	}
	return resp, nil
}

func (d *recordingDeleter) Delete(_ context.Context, req *sdk.DeleteRequest, progress sdk.Progress) (*sdk.DeleteResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seen = append(d.seen, req.TenantID)
	resp := &sdk.DeleteResponse{Breakdown: map[string]int64{}}
	for table, n := range d.items[req.TenantID] {
		resp.Breakdown[table] = n
		resp.DeletedCount += n
		d.items[req.TenantID][table] = 0 // a store still knows its tables
	}
	progress(resp.DeletedCount)
	return resp, nil
}

func (d *recordingDeleter) tenantsSeen() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := slices.Clone(d.seen)
	sort.Strings(out)
	return slices.Compact(out)
}

func (d *recordingDeleter) snapshot() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, _ := json.Marshal(d.items)
	return string(b)
}

type deleterSet map[string]*recordingDeleter

func (s deleterSet) DeleterNames() []string {
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (s deleterSet) Deleter(name string) (sdk.TenantDeleter, error) {
	d, ok := s[name]
	if !ok {
		return nil, fmt.Errorf("no deleter %q", name)
	}
	return d, nil
}

// tenantAPI is the admin API of a daemon with a real state store of the
// given dialect, a running job runner and the given deleters, with
// Idempotency-Key on.
func tenantAPI(t *testing.T, st store.Store, src deletion.Deleters, format string) http.Handler {
	t.Helper()
	log := hclog.NewNullLogger()
	reg := deletion.NewRegistry(src, func() int { return 2 })
	runner := deletion.NewRunner(st, reg, "d1", func() deletion.RunnerConfig {
		return deletion.RunnerConfig{PollInterval: 20 * time.Millisecond, Lease: time.Second, Verify: true, TenantIDFormat: format,
			RetryPolicy: retry.Policy{Initial: 50 * time.Millisecond, Multiplier: 2, Max: time.Second, Jitter: retry.JitterNone}}
	}, log, nil, nil)
	require.NoError(t, runner.Start(testsvc.Context(t, time.Minute)))
	t.Cleanup(func() { _ = runner.Stop(testsvc.Context(t, time.Minute)) })
	formatFn := func() string { return format }
	srv := adminapi.New(adminapi.Options{
		Logger: log, Policy: func() adminapi.AccessPolicy { return adminapi.AccessPolicy{} },
		Registry: prometheus.NewRegistry(), Gatherer: prometheus.NewRegistry(),
		Routes: []func(*http.ServeMux){adminapi.TenantRoutes(deletion.NewService(st, reg, runner, deletion.ServiceOptions{Config: func() deletion.ServiceConfig { return deletion.ServiceConfig{TenantIDFormat: format} }}))},
		Idempotency: &adminapi.IdempotencyOptions{Store: st,
			TTL: func() time.Duration { return time.Hour }, MismatchStatus: func() int { return 409 },
			LockTimeout:  func() time.Duration { return time.Minute },
			CanonicalURI: adminapi.CanonicalTenantURI(formatFn)},
	})
	return srv.Handler()
}

func call(t *testing.T, h http.Handler, method, target string, headers map[string]string) (*httptest.ResponseRecorder, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, "http://localhost"+target, nil)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var body map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), "%s", rec.Body.String())
	return rec, body
}

// TestTenantIDIsCanonicalEverywhere is issue 10's case 5 through the admin
// API: an operator types a UUID in upper case. The job, the report, the
// counts and every plugin call must use the one canonical spelling (lower
// case), or a store that compares strings (Redis, DynamoDB) keeps the
// tenant's data while the job says COMPLETED and verified.
func TestTenantIDIsCanonicalEverywhere(t *testing.T) {
	const (
		upper = "44444444-DDDD-4DDD-8DDD-444444444444"
		lower = "44444444-dddd-4ddd-8ddd-444444444444"
		other = "55555555-eeee-4eee-8eee-555555555555"
	)
	storetest.Each(t, func(t *testing.T, _ context.Context, st store.Store) {
		// The application stored the upper-case spelling as a separate
		// string: it is someone else's data as far as lifecycled knows.
		kv := &recordingDeleter{items: map[string]map[string]int64{
			lower: {"session:{tenant}:*": 3, "csrf:{tenant}:*": 2},
			upper: {"session:{tenant}:*": 7},
			other: {"session:{tenant}:*": 4},
		}}
		sql := &recordingDeleter{items: map[string]map[string]int64{
			lower: {"public.steps": 10, "public.instances": 5},
			other: {"public.steps": 1},
		}}
		h := tenantAPI(t, st, deleterSet{"redis:sessions": kv, "postgres:app": sql}, "uuid")

		rec, counts := call(t, h, "GET", "/api/v1/tenants/"+upper+"/counts", nil)
		require.Equal(t, 200, rec.Code, "%v", counts)
		require.Equal(t, lower, counts["tenant_id"])
		require.Equal(t, map[string]any{"redis:sessions": 5.0, "postgres:app": 15.0}, counts["counts"])
		require.Equal(t, map[string]any{
			"redis:sessions": map[string]any{"session:{tenant}:*": 3.0, "csrf:{tenant}:*": 2.0},
			"postgres:app":   map[string]any{"public.steps": 10.0, "public.instances": 5.0},
		}, counts["breakdown"])
		require.Equal(t, 20.0, counts["total"])
		require.Equal(t, true, counts["complete"])
		require.Equal(t, []any{}, counts["failed"])

		key := map[string]string{"Idempotency-Key": "k-canonical"}
		rec, job := call(t, h, "POST", "/api/v1/tenants/"+upper+"/deletion", key)
		require.Equal(t, 202, rec.Code, "%v", job)
		require.Equal(t, lower, job["tenant_id"], "the job is stored under the canonical id")
		require.Equal(t, "/api/v1/tenants/"+lower+"/deletion", rec.Header().Get("Location"))

		// The same key with the other spelling is the same request: a
		// replay of the same job, not a mismatch and not a second job.
		rec, replay := call(t, h, "POST", "/api/v1/tenants/"+lower+"/deletion", key)
		require.Equal(t, 202, rec.Code, "%v", replay)
		require.Equal(t, "true", rec.Header().Get("Idempotent-Replayed"))
		require.Equal(t, job["id"], replay["id"])

		var done map[string]any
		testsvc.Eventually(t, 20*time.Second, func() bool {
			rec, done = call(t, h, "GET", "/api/v1/tenants/"+upper+"/deletion", nil)
			return rec.Code == 200 && done["status"] == "COMPLETED"
		}, "job completes (last answer %v)", done)
		require.Equal(t, lower, done["tenant_id"])
		require.Equal(t, job["id"], done["id"])
		require.Equal(t, true, done["verified"])
		report := done["report"].(map[string]any)
		require.Equal(t, map[string]any{
			"redis:sessions": map[string]any{"deleted_count": 5.0, "breakdown": map[string]any{"session:{tenant}:*": 3.0, "csrf:{tenant}:*": 2.0}},
			"postgres:app":   map[string]any{"deleted_count": 15.0, "breakdown": map[string]any{"public.steps": 10.0, "public.instances": 5.0}},
		}, report["succeeded"])
		require.Equal(t, map[string]any{
			"redis:sessions": map[string]any{"count": 0.0, "breakdown": map[string]any{"session:{tenant}:*": 0.0, "csrf:{tenant}:*": 0.0}, "method": "count"},
			"postgres:app":   map[string]any{"count": 0.0, "breakdown": map[string]any{"public.steps": 0.0, "public.instances": 0.0}, "method": "count"},
		}, report["verification"], "fake deleters without a proof of their own are verified by a count, and say so")
		for _, d := range done["deleters"].([]any) {
			d := d.(map[string]any)
			require.Equal(t, report["succeeded"].(map[string]any)[d["name"].(string)].(map[string]any)["breakdown"], d["breakdown"])
		}
		rec, same := call(t, h, "GET", "/api/v1/tenants/"+lower+"/deletion", nil)
		require.Equal(t, 200, rec.Code)
		require.Equal(t, done["id"], same["id"])

		for name, d := range map[string]*recordingDeleter{"redis": kv, "postgres": sql} {
			require.Equal(t, []string{lower}, d.tenantsSeen(), "%s was only ever called with the canonical id", name)
		}
		require.Equal(t, `{"44444444-DDDD-4DDD-8DDD-444444444444":{"session:{tenant}:*":7},"44444444-dddd-4ddd-8ddd-444444444444":{"csrf:{tenant}:*":0,"session:{tenant}:*":0},"55555555-eeee-4eee-8eee-555555555555":{"session:{tenant}:*":4}}`,
			kv.snapshot(), "the upper-case string and the other tenant are untouched")
		require.Equal(t, `{"44444444-dddd-4ddd-8ddd-444444444444":{"public.instances":0,"public.steps":0},"55555555-eeee-4eee-8eee-555555555555":{"public.steps":1}}`, sql.snapshot())
	})
}

// TestRegexpTenantFormatKeepsTheIDAsGiven: with a regular expression the
// daemon cannot know which spellings are equal, so it does not guess; the
// expression must admit one spelling per tenant.
func TestRegexpTenantFormatKeepsTheIDAsGiven(t *testing.T) {
	d := &recordingDeleter{items: map[string]map[string]int64{"Acme": {"t": 2}, "acme": {"t": 3}}}
	h := tenantAPI(t, storetest.Open(t, migrations.SQLite), deleterSet{"x": d}, "^[A-Za-z]{1,64}$")
	rec, counts := call(t, h, "GET", "/api/v1/tenants/Acme/counts", nil)
	require.Equal(t, 200, rec.Code, "%v", counts)
	require.Equal(t, "Acme", counts["tenant_id"])
	require.Equal(t, map[string]any{"x": 2.0}, counts["counts"])
	require.Equal(t, []string{"Acme"}, d.tenantsSeen())
	rec, body := call(t, h, "GET", "/api/v1/tenants/acme-1/counts", nil)
	require.Equal(t, 400, rec.Code)
	require.Equal(t, "SYS_TENANT_VALIDATION_ERROR", code(body))
	require.True(t, strings.Contains(body["error"].(map[string]any)["message"].(string), "tenant_id_format"), "%v", body)
}

// failingDeleter cannot count: its store is down.
type failingDeleter struct{ recordingDeleter }

func (*failingDeleter) Count(context.Context, *sdk.CountRequest) (*sdk.CountResponse, error) {
	return nil, sdk.Retryable(fmt.Errorf("dial tcp 127.0.0.1:6379: connection refused"), 0)
}

type mixedSet struct {
	deleterSet
	down string
}

func (m mixedSet) DeleterNames() []string { return append(m.deleterSet.DeleterNames(), m.down) }
func (m mixedSet) Deleter(name string) (sdk.TenantDeleter, error) {
	if name == m.down {
		return &failingDeleter{}, nil
	}
	return m.deleterSet.Deleter(name)
}

// TestCountsSayWhenTheTotalIsIncomplete: a deleter that cannot count is
// listed in failed, and complete is false so that nobody reads total as
// what a deletion would remove.
func TestCountsSayWhenTheTotalIsIncomplete(t *testing.T) {
	const tenant = "550e8400-e29b-41d4-a716-446655440000"
	up := &recordingDeleter{items: map[string]map[string]int64{tenant: {"public.steps": 4}}}
	h := tenantAPI(t, storetest.Open(t, migrations.SQLite), mixedSet{deleterSet: deleterSet{"postgres:app": up}, down: "redis:sessions"}, "uuid")
	rec, body := call(t, h, "GET", "/api/v1/tenants/"+tenant+"/counts", nil)
	require.Equal(t, 200, rec.Code, "%v", body)
	require.Equal(t, false, body["complete"])
	require.Equal(t, 4.0, body["total"])
	require.Equal(t, map[string]any{"postgres:app": 4.0}, body["counts"])
	require.Equal(t, map[string]any{"postgres:app": map[string]any{"public.steps": 4.0}}, body["breakdown"])
	failed := body["failed"].([]any)
	require.Len(t, failed, 1)
	require.Equal(t, "redis:sessions", failed[0].(map[string]any)["deleter"])
	require.Contains(t, failed[0].(map[string]any)["error"], "connection refused")
}

func TestCanonicalTenantURI(t *testing.T) {
	uuidFormat := adminapi.CanonicalTenantURI(func() string { return "uuid" })
	regexpFormat := adminapi.CanonicalTenantURI(func() string { return "^[A-Za-z]{1,64}$" })
	tests := map[string]struct {
		canon  func(*http.Request) string
		target string
		want   string
	}{
		"upper-case uuid":         {uuidFormat, "/api/v1/tenants/44444444-DDDD-4DDD-8DDD-444444444444/deletion", "/api/v1/tenants/44444444-dddd-4ddd-8ddd-444444444444/deletion"},
		"percent-encoded letters": {uuidFormat, "/api/v1/tenants/44444444-%44DDD-4DDD-8DDD-444444444444/deletion", "/api/v1/tenants/44444444-dddd-4ddd-8ddd-444444444444/deletion"},
		"query kept":              {uuidFormat, "/api/v1/tenants/44444444-DDDD-4DDD-8DDD-444444444444/deletion?x=1", "/api/v1/tenants/44444444-dddd-4ddd-8ddd-444444444444/deletion?x=1"},
		"canonical unchanged":     {uuidFormat, "/api/v1/tenants/44444444-dddd-4ddd-8ddd-444444444444/deletion", "/api/v1/tenants/44444444-dddd-4ddd-8ddd-444444444444/deletion"},
		"invalid id as sent":      {uuidFormat, "/api/v1/tenants/not-a-uuid/deletion", "/api/v1/tenants/not-a-uuid/deletion"},
		"other routes as sent":    {uuidFormat, "/api/v1/dlq/Orders.dlq.v1/retry-all", "/api/v1/dlq/Orders.dlq.v1/retry-all"},
		"regexp keeps the case":   {regexpFormat, "/api/v1/tenants/Acme/deletion", "/api/v1/tenants/Acme/deletion"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "http://localhost"+tc.target, nil)
			require.Equal(t, tc.want, tc.canon(req))
		})
	}
}
