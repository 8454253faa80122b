package adminapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/adminapi"
	"github.com/lifecycled/lifecycled/daemon/internal/archive"
	"github.com/lifecycled/lifecycled/daemon/internal/config"
	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/bulk"
	"github.com/lifecycled/lifecycled/daemon/internal/pluginhost"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
	"github.com/lifecycled/lifecycled/migrations"
)

// newHandler is the admin API of a daemon with an embedded store and no
// plugins, served in-process.
func newHandler(t testing.TB) http.Handler {
	st := storetest.Open(t, migrations.SQLite)
	cfg := config.Defaults()
	log := hclog.NewNullLogger()
	host := pluginhost.New(pluginhost.Options{}, log, nil) // no plugins configured
	svc := dlq.NewService(st, host, func() dlq.Policy { return dlq.Policy{MaxRetries: 3, Lease: time.Minute} }, "test", log,
		dlq.NewMetrics(nil, st, nil, nil))
	reg := deletion.NewRegistry(host, func() int { return 1 })
	tenants := deletion.NewService(st, reg, nil, deletion.ServiceOptions{Config: func() deletion.ServiceConfig { return deletion.ServiceConfig{TenantIDFormat: "uuid"} }})
	retention := archive.New(st, func() archive.Config {
		return archive.Config{Retention: cfg.Archive.Retention.Duration, ArchiveRetention: cfg.Archive.ArchiveRetention.Duration, BatchSize: 100}
	}, log, nil, nil)
	srv := adminapi.New(adminapi.Options{
		Logger: log, Policy: func() adminapi.AccessPolicy { return adminapi.AccessPolicy{} },
		Registry: prometheus.NewRegistry(), Gatherer: prometheus.NewRegistry(),
		Routes: []func(*http.ServeMux){adminapi.DLQRoutes(svc, bulk.NewService(svc, st, log)), adminapi.TenantRoutes(tenants), adminapi.ArchiveRoutes(retention)},
	})
	return srv.Handler()
}

func do(h http.Handler, method, target string) (int, map[string]any) {
	req := httptest.NewRequest(method, "http://localhost"+target, nil)
	if strings.Contains(target, "%") || strings.Contains(target, "..") {
		// Keep the raw path as a client would send it.
		req.URL, _ = url.Parse("http://localhost" + target)
		req.RequestURI = target
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var body map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	return rec.Code, body
}

func code(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func TestDLQBadInputIs400WithTheDocumentedCode(t *testing.T) {
	h := newHandler(t)
	long := strings.Repeat("a", 300)
	cases := map[string]struct{ method, path string }{
		"non-uuid id":             {"GET", "/api/v1/dlq/messages/not-a-uuid"},
		"uuid without dashes":     {"GET", "/api/v1/dlq/messages/550e8400e29b41d4a716446655440000"},
		"retry non-uuid":          {"POST", "/api/v1/dlq/messages/123/retry"},
		"revive non-uuid":         {"POST", "/api/v1/dlq/messages/123/revive"},
		"delete non-uuid":         {"DELETE", "/api/v1/dlq/messages/'%20OR%201=1"},
		"page 0":                  {"GET", "/api/v1/dlq/orders.dlq.v1?page=0"},
		"negative page":           {"GET", "/api/v1/dlq/orders.dlq.v1?page=-1"},
		"page_size 0":             {"GET", "/api/v1/dlq/orders.dlq.v1?page_size=0"},
		"page_size 1001":          {"GET", "/api/v1/dlq/orders.dlq.v1?page_size=1001"},
		"non-numeric page":        {"GET", "/api/v1/dlq/orders.dlq.v1?page=two"},
		"huge page":               {"GET", "/api/v1/dlq/orders.dlq.v1?page=99999999999999999999"},
		"repeated page":           {"GET", "/api/v1/dlq/orders.dlq.v1?page=1&page=2"},
		"unknown status":          {"GET", "/api/v1/dlq/orders.dlq.v1?status=LOST"},
		"topic with a NUL":        {"GET", "/api/v1/dlq/orders%00dlq"},
		"topic with a newline":    {"GET", "/api/v1/dlq/orders%0Adlq"},
		"topic not UTF-8":         {"GET", "/api/v1/dlq/orders%FFdlq"},
		"topic dot dot":           {"GET", "/api/v1/dlq/.."},
		"topic encoded dot dot":   {"GET", "/api/v1/dlq/%2e%2e"},
		"retry-all dot dot":       {"POST", "/api/v1/dlq/../retry-all"},
		"topic 300 chars":         {"GET", "/api/v1/dlq/" + long},
		"retry-all 300 chars":     {"POST", "/api/v1/dlq/" + long + "/retry-all"},
		"retry-all bad topic":     {"POST", "/api/v1/dlq/a%07b/retry-all"},
		"retry-all dry_run maybe": {"POST", "/api/v1/dlq/orders.dlq.v1/retry-all?dry_run=maybe"},
		"retry-all dry_run twice": {"POST", "/api/v1/dlq/orders.dlq.v1/retry-all?dry_run=true&dry_run=false"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			status, body := do(h, tc.method, tc.path)
			require.Equal(t, 400, status, "%v", body)
			require.Equal(t, "SYS_DLQ_VALIDATION_ERROR", code(body), "%v", body)
			require.NotEmpty(t, body["error"].(map[string]any)["request_id"])
		})
	}
}

func TestTenantBadInputIs400(t *testing.T) {
	h := newHandler(t)
	for _, p := range []string{"not-a-uuid", "*", "%27%20OR%20%271%27%3D%271", "550e8400-e29b-41d4-a716-44665544000%3F", strings.Repeat("a", 10*1024)} {
		for _, r := range []struct{ m, suffix string }{{"GET", "/counts"}, {"POST", "/deletion"}, {"GET", "/deletion"}} {
			status, body := do(h, r.m, "/api/v1/tenants/"+p+r.suffix)
			require.Equal(t, 400, status, "%s %s: %v", r.m, p, body)
			require.Equal(t, "SYS_TENANT_VALIDATION_ERROR", code(body))
		}
	}
}

func TestDLQHappyPathsWithoutSources(t *testing.T) {
	h := newHandler(t)
	status, body := do(h, "GET", "/api/v1/dlq/orders.dlq.v1")
	require.Equal(t, 200, status)
	require.Equal(t, map[string]any{"total_count": 0.0, "page": 1.0, "page_size": 20.0, "has_next": false}, body["pagination"])
	require.Equal(t, []any{}, body["messages"])
	status, body = do(h, "GET", "/api/v1/dlq/messages/550e8400-e29b-41d4-a716-446655440000")
	require.Equal(t, 404, status)
	require.Equal(t, "SYS_DLQ_NOT_FOUND", code(body))
	require.Equal(t, "dlq message not found: 550e8400-e29b-41d4-a716-446655440000", body["error"].(map[string]any)["message"])
	status, body = do(h, "POST", "/api/v1/dlq/messages/550e8400-e29b-41d4-a716-446655440000/retry")
	require.Equal(t, 404, status)
	require.Equal(t, "SYS_DLQ_NOT_FOUND", code(body))
	status, body = do(h, "POST", "/api/v1/dlq/messages/550e8400-e29b-41d4-a716-446655440000/revive")
	require.Equal(t, 404, status)
	require.Equal(t, "SYS_DLQ_NOT_FOUND", code(body))
	require.Equal(t, "dlq message not found: 550e8400-e29b-41d4-a716-446655440000", body["error"].(map[string]any)["message"])
	status, body = do(h, "POST", "/api/v1/dlq/orders.dlq.v1/retry-all")
	require.Equal(t, 200, status)
	require.Equal(t, 0.0, body["retried"])
	require.Equal(t, "0 messages retried in topic orders.dlq.v1", body["message"])
	status, body = do(h, "POST", "/api/v1/dlq/orders.dlq.v1/retry-all?dry_run=true")
	require.Equal(t, 200, status)
	require.Equal(t, map[string]any{"retried": 0.0, "failed": 0.0, "unavailable": 0.0, "dry_run": true, "retryable": 0.0,
		"message": "0 messages would be retried in topic orders.dlq.v1"}, body)
	status, body = do(h, "GET", "/api/v1/dlq")
	require.Equal(t, 200, status)
	require.Equal(t, []any{}, body["topics"])
}

func TestArchiveRunDryRunAndBadInput(t *testing.T) {
	h := newHandler(t)
	status, body := do(h, "POST", "/api/v1/archive/run?dry_run=true")
	require.Equal(t, 200, status, "%v", body)
	require.Equal(t, true, body["dry_run"])
	require.Equal(t, 0.0, body["archived"])
	status, body = do(h, "POST", "/api/v1/archive/run")
	require.Equal(t, 200, status, "%v", body)
	require.Nil(t, body["dry_run"], "a real pass says nothing of dry runs")
	for _, q := range []string{"dry_run=yes", "dry_run=", "dry_run=1&dry_run=1"} {
		status, body = do(h, "POST", "/api/v1/archive/run?"+q)
		require.Equal(t, 400, status, "%s: %v", q, body)
		require.Equal(t, "SYS_VALIDATION_ERROR", code(body), "%s", q)
		require.Contains(t, body["error"].(map[string]any)["message"], "dry_run")
	}
}

// GET /api/v1/archive lists this daemon's passes, newest first, the
// asked-for ones as "manual", with what they did; a dry run is not a pass.
func TestArchiveStatusListsPasses(t *testing.T) {
	h := newHandler(t)
	status, body := do(h, "GET", "/api/v1/archive")
	require.Equal(t, 200, status, "%v", body)
	require.Equal(t, []any{}, body["passes"])
	require.Nil(t, body["next_run_at"], "the loop is not running")
	require.Equal(t, float64(30*24*3600), body["retention_seconds"])
	status, _ = do(h, "POST", "/api/v1/archive/run?dry_run=true")
	require.Equal(t, 200, status)
	for i := 0; i < 2; i++ {
		status, _ = do(h, "POST", "/api/v1/archive/run")
		require.Equal(t, 200, status)
	}
	status, body = do(h, "GET", "/api/v1/archive")
	require.Equal(t, 200, status)
	passes := body["passes"].([]any)
	require.Len(t, passes, 2, "two passes; the dry run is none")
	first, second := passes[0].(map[string]any), passes[1].(map[string]any)
	require.Equal(t, "manual", first["trigger"])
	require.Equal(t, 0.0, first["archived"])
	require.Nil(t, first["error"])
	require.GreaterOrEqual(t, first["started_at"], second["started_at"], "newest first")
	status, body = do(h, "GET", "/api/v1/archive?x=1")
	require.Equal(t, 400, status, "%v", body)
}

func FuzzRouteParams(f *testing.F) {
	f.Add("orders.dlq.v1", "page=1&page_size=20&status=PENDING", "550e8400-e29b-41d4-a716-446655440000")
	f.Add("..", "page=0", "x")
	f.Add("a%2Fb", "page_size=1001&status=", "%00")
	f.Add("orders.dlq.v1", "dry_run=true", "")
	f.Add("orders.dlq.v1", "dry_run=1&dry_run=", "")
	h := newHandler(f)
	f.Fuzz(func(t *testing.T, topic, query, id string) {
		for _, r := range []struct{ m, p string }{
			{"GET", "/api/v1/dlq/" + url.PathEscape(topic) + "?" + query},
			{"POST", "/api/v1/dlq/" + url.PathEscape(topic) + "/retry-all?" + query},
			{"POST", "/api/v1/archive/run?" + query},
			{"GET", "/api/v1/dlq/messages/" + url.PathEscape(id)},
			{"DELETE", "/api/v1/dlq/messages/" + url.PathEscape(id)},
			{"GET", "/api/v1/tenants/" + url.PathEscape(id) + "/counts"},
		} {
			// A client cannot put these on a request line: it escapes them.
			if _, err := url.Parse("http://localhost" + r.p); err != nil || strings.ContainsFunc(r.p, func(c rune) bool { return c <= ' ' || c == 0x7f }) {
				continue
			}
			status, body := do(h, r.m, r.p)
			if status >= 500 {
				t.Fatalf("%s %s: %d %v", r.m, r.p, status, body)
			}
			if status >= 400 && code(body) == "" {
				t.Fatalf("%s %s: %d without the envelope", r.m, r.p, status)
			}
		}
	})
}
