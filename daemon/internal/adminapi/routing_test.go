package adminapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/adminapi"
)

// routedServer serves two routes behind the real middleware, with a policy
// that lets uid 0 (httptest has no peer credentials) do anything.
func routedServer(t *testing.T, policy adminapi.AccessPolicy) (http.Handler, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	srv := adminapi.New(adminapi.Options{
		Logger: hclog.NewNullLogger(), Policy: func() adminapi.AccessPolicy { return policy },
		Registry: reg, Gatherer: reg,
		Routes: []func(*http.ServeMux){func(mux *http.ServeMux) {
			mux.HandleFunc("GET /api/v1/dlq/messages/{id}", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
			mux.HandleFunc("DELETE /api/v1/dlq/messages/{id}", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
			mux.HandleFunc("POST /api/v1/dlq/{topic}/retry-all", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
		}},
	})
	return srv.Handler(), reg
}

func TestWrongMethodIs405WithAllow(t *testing.T) {
	h, _ := routedServer(t, adminapi.AccessPolicy{})
	for name, tc := range map[string]struct{ method, path, allow string }{
		"post on a message": {"POST", "/api/v1/dlq/messages/0193", "GET, HEAD, DELETE"},
		"get on retry-all":  {"GET", "/api/v1/dlq/orders.dlq.v1/retry-all", "POST"},
		"put on health":     {"PUT", "/healthz", "GET, HEAD"},
	} {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, "http://localhost"+tc.path, nil))
			require.Equal(t, 405, rec.Code, rec.Body.String())
			require.Equal(t, tc.allow, rec.Header().Get("Allow"))
			require.Contains(t, rec.Body.String(), "METHOD_NOT_ALLOWED")
		})
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "http://localhost/api/v1/nope", nil))
	require.Equal(t, 404, rec.Code, "a path no route has is still 404")
}

func TestRequestsAnsweredBeforeRoutingAreCountedUnderTheirRoute(t *testing.T) {
	h, reg := routedServer(t, adminapi.AccessPolicy{AllowUIDs: []int{4242}})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "http://localhost/api/v1/dlq/messages/abc", nil)
	req.Header.Set("Origin", "http://evil.example")
	h.ServeHTTP(rec, req)
	require.Equal(t, 403, rec.Code)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "http://localhost/api/v1/nope", nil))
	require.Equal(t, 404, rec.Code)

	require.Equal(t, 1.0, requests(t, reg, "GET /api/v1/dlq/messages/{id}", "403"), "the 403 is counted under its route, not unmatched")
	require.Equal(t, 1.0, requests(t, reg, "unmatched", "404"))
}

// requests reads lifecycled_admin_requests_total{route,code}.
func requests(t *testing.T, reg *prometheus.Registry, route, code string) float64 {
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "lifecycled_admin_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["route"] == route && labels["code"] == code {
				return m.GetCounter().GetValue()
			}
		}
	}
	var have []string
	for _, mf := range mfs {
		have = append(have, mf.GetName())
	}
	t.Fatalf("no lifecycled_admin_requests_total{route=%q,code=%q}; families: %s", route, code, strings.Join(have, " "))
	return 0
}
