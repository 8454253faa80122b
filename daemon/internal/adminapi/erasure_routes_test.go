package adminapi_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"net/http/httptest"
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
	"github.com/lifecycled/lifecycled/migrations"
)

// erasureAPI is the admin API with every erasure route over a real store,
// a running job runner and a notary whose public key it returns.
func erasureAPI(t *testing.T, st store.Store, src deletion.Deleters) (http.Handler, ed25519.PublicKey) {
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
		Config: func() deletion.ServiceConfig { return deletion.ServiceConfig{TenantIDFormat: "uuid"} }})
	srv := adminapi.New(adminapi.Options{
		Logger: log, Policy: func() adminapi.AccessPolicy { return adminapi.AccessPolicy{} },
		Registry: prometheus.NewRegistry(), Gatherer: prometheus.NewRegistry(),
		Routes: []func(*http.ServeMux){adminapi.TenantRoutes(svc), adminapi.DeletionRoutes(svc), adminapi.HoldRoutes(svc),
			adminapi.ReceiptRoutes(svc)},
	})
	return srv.Handler(), pub
}

// send makes a request with a body and decodes the JSON answer.
func send(t *testing.T, h http.Handler, method, target string, body any) (int, map[string]any, []byte) {
	t.Helper()
	var rd *bytes.Reader
	switch b := body.(type) {
	case nil:
		rd = bytes.NewReader(nil)
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		raw, err := json.Marshal(b)
		require.NoError(t, err)
		rd = bytes.NewReader(raw)
	}
	req := httptest.NewRequest(method, "http://localhost"+target, rd)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	return rec.Code, out, rec.Body.Bytes()
}

func field(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	d, _ := e["details"].([]any)
	if len(d) == 0 {
		return ""
	}
	f, _ := d[0].(map[string]any)["field"].(string)
	return f
}

func TestJobListRoutes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, _ context.Context, st store.Store) {
		a, b := uuid.NewString(), uuid.NewString()
		d := &recordingDeleter{items: map[string]map[string]int64{a: {"t": 2}, b: {"t": 3}}}
		h, _ := erasureAPI(t, st, deleterSet{"x": d})
		later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		code, job, _ := send(t, h, "POST", "/api/v1/tenants/"+a+"/deletion", map[string]any{"not_before": later})
		require.Equal(t, 202, code, "%v", job)
		require.Equal(t, "SCHEDULED", job["status"])
		require.Equal(t, later[:19], job["not_before"].(string)[:19])
		code, _, _ = send(t, h, "POST", "/api/v1/tenants/"+b+"/deletion", nil)
		require.Equal(t, 202, code)
		testsvc.Eventually(t, 20*time.Second, func() bool {
			_, j, _ := send(t, h, "GET", "/api/v1/tenants/"+b+"/deletion", nil)
			return j["status"] == "COMPLETED"
		}, "b completes")
		code, _, _ = send(t, h, "POST", "/api/v1/tenants/"+b+"/deletion", nil)
		require.Equal(t, 202, code, "a second job for b")

		code, page, _ := send(t, h, "GET", "/api/v1/deletions?limit=2", nil)
		require.Equal(t, 200, code, "%v", page)
		jobs := page["jobs"].([]any)
		require.Len(t, jobs, 2)
		require.Equal(t, b, jobs[0].(map[string]any)["tenant_id"], "newest first")
		require.Equal(t, b, jobs[1].(map[string]any)["tenant_id"])
		require.Equal(t, "COMPLETED", jobs[1].(map[string]any)["status"])
		next, ok := page["next_cursor"].(string)
		require.True(t, ok, "%v", page)
		code, page, _ = send(t, h, "GET", "/api/v1/deletions?limit=2&cursor="+next, nil)
		require.Equal(t, 200, code)
		require.Len(t, page["jobs"].([]any), 1)
		require.Equal(t, a, page["jobs"].([]any)[0].(map[string]any)["tenant_id"])
		require.Equal(t, "SCHEDULED", page["jobs"].([]any)[0].(map[string]any)["status"])
		require.Nil(t, page["next_cursor"], "the last page")

		_, page, _ = send(t, h, "GET", "/api/v1/tenants/"+b+"/deletions", nil)
		require.Len(t, page["jobs"].([]any), 2, "every job of the tenant")
		_, page, _ = send(t, h, "GET", "/api/v1/deletions?status=scheduled,COMPLETED&tenant="+a, nil)
		require.Len(t, page["jobs"].([]any), 1)

		for target, want := range map[string]string{
			"/api/v1/deletions?status=DONE":                   "status",
			"/api/v1/deletions?statuss=DONE":                  "statuss",
			"/api/v1/deletions?limit=0":                       "limit",
			"/api/v1/deletions?cursor=zzz":                    "cursor",
			"/api/v1/deletions?created_after=yesterday":       "created_after",
			"/api/v1/deletions?tenant=not-a-uuid":             "",
			"/api/v1/tenants/" + a + "/deletions?tenant=" + b: "tenant",
		} {
			code, body, _ := send(t, h, "GET", target, nil)
			require.Equal(t, 400, code, "%s: %v", target, body)
			require.Equal(t, "SYS_TENANT_VALIDATION_ERROR", code2(body), target)
			require.Equal(t, want, field(body), target)
		}
	})
}

func code2(body map[string]any) string { return code(body) }

func TestBulkDeletionRoute(t *testing.T) {
	storetest.Each(t, func(t *testing.T, _ context.Context, st store.Store) {
		ids := []string{uuid.NewString(), uuid.NewString(), uuid.NewString()}
		d := &recordingDeleter{items: map[string]map[string]int64{}}
		h, _ := erasureAPI(t, st, deleterSet{"x": d})

		code, body, _ := send(t, h, "POST", "/api/v1/deletions", map[string]any{"tenant_ids": []string{ids[0], "nope", ids[1], "also nope"}})
		require.Equal(t, 400, code, "%v", body)
		require.Equal(t, "SYS_TENANT_VALIDATION_ERROR", code2(body))
		details := body["error"].(map[string]any)["details"].([]any)
		require.Len(t, details, 2)
		require.Equal(t, "tenant_ids[1]", details[0].(map[string]any)["field"])
		require.Equal(t, "tenant_ids[3]", details[1].(map[string]any)["field"])
		_, page, _ := send(t, h, "GET", "/api/v1/deletions", nil)
		require.Empty(t, page["jobs"], "nothing was queued")

		code, _, _ = send(t, h, "PUT", "/api/v1/tenants/"+ids[2]+"/hold", map[string]any{"reason": "case 9"})
		require.Equal(t, 200, code)
		later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		upper := []byte(ids[0])
		copy(upper, bytes.ToUpper(upper))
		code, body, _ = send(t, h, "POST", "/api/v1/deletions", map[string]any{
			"tenant_ids": []string{ids[0], ids[1], ids[2], string(upper)}, "not_before": later})
		require.Equal(t, 202, code, "%v", body)
		require.EqualValues(t, 2, body["queued"])
		require.EqualValues(t, 1, body["existing"], "the other spelling of ids[0] is the same tenant")
		require.EqualValues(t, 1, body["on_hold"])
		results := body["results"].([]any)
		require.Len(t, results, 4)
		held := results[2].(map[string]any)
		require.Equal(t, ids[2], held["tenant_id"])
		require.Equal(t, "SYS_TENANT_ON_HOLD", held["error"].(map[string]any)["code"])
		first := results[0].(map[string]any)
		require.Equal(t, "SCHEDULED", first["status"])
		require.Equal(t, true, first["created"])
		require.Equal(t, first["job_id"], results[3].(map[string]any)["job_id"])
		require.Equal(t, false, results[3].(map[string]any)["created"])

		soon := time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04:05")
		for name, bad := range map[string]any{
			"no body":       nil,
			"empty list":    map[string]any{"tenant_ids": []string{}},
			"unknown field": `{"tenant_ids":["x"],"dry_run":true}`,
			"bad time":      map[string]any{"tenant_ids": []string{ids[0]}, "not_before": "tomorrow"},
			"comma time":    map[string]any{"tenant_ids": []string{ids[0]}, "not_before": soon + ",5Z"},
			"long fraction": map[string]any{"tenant_ids": []string{ids[0]}, "not_before": soon + ".0000000001Z"},
		} {
			code, body, _ := send(t, h, "POST", "/api/v1/deletions", bad)
			require.Equal(t, 400, code, "%s: %v", name, body)
			require.Equal(t, "SYS_TENANT_VALIDATION_ERROR", code2(body), name)
		}
	})
}

func TestCancelAndHoldRoutes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, _ context.Context, st store.Store) {
		tenant := uuid.NewString()
		d := &recordingDeleter{items: map[string]map[string]int64{tenant: {"t": 4}}}
		h, _ := erasureAPI(t, st, deleterSet{"x": d})

		code, body, _ := send(t, h, "POST", "/api/v1/tenants/"+tenant+"/deletion/cancel", nil)
		require.Equal(t, 404, code, "%v", body)
		require.Equal(t, "SYS_TENANT_NOT_FOUND", code2(body))
		later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		code, _, _ = send(t, h, "POST", "/api/v1/tenants/"+tenant+"/deletion", map[string]any{"not_before": later})
		require.Equal(t, 202, code)
		code, body, _ = send(t, h, "POST", "/api/v1/tenants/"+tenant+"/deletion/cancel", `{"force":true}`)
		require.Equal(t, 400, code, "a body is never ignored: %v", body)
		code, body, _ = send(t, h, "POST", "/api/v1/tenants/"+tenant+"/deletion/cancel", nil)
		require.Equal(t, 200, code, "%v", body)
		require.Equal(t, "CANCELLED", body["status"])
		require.NotNil(t, body["finished_at"])
		code, body, _ = send(t, h, "POST", "/api/v1/tenants/"+tenant+"/deletion/cancel", nil)
		require.Equal(t, 409, code, "%v", body)
		require.Equal(t, "SYS_TENANT_CONFLICT", code2(body))
		require.Equal(t, `{"`+tenant+`":{"t":4}}`, d.snapshot(), "nothing was deleted")

		// Holds.
		for name, bad := range map[string]any{"no body": nil, "no reason": `{}`, "empty reason": map[string]any{"reason": " "},
			"control character": map[string]any{"reason": "a\x00b"}} {
			code, body, _ := send(t, h, "PUT", "/api/v1/tenants/"+tenant+"/hold", bad)
			require.Equal(t, 400, code, "%s: %v", name, body)
		}
		code, body, _ = send(t, h, "GET", "/api/v1/tenants/"+tenant+"/hold", nil)
		require.Equal(t, 404, code)
		code, hold, _ := send(t, h, "PUT", "/api/v1/tenants/"+tenant+"/hold", map[string]any{"reason": "litigation 2026-17"})
		require.Equal(t, 200, code, "%v", hold)
		require.Equal(t, tenant, hold["tenant_id"])
		require.Equal(t, "litigation 2026-17", hold["reason"])
		require.Contains(t, hold, "held_at")
		require.Contains(t, hold, "held_by_uid")
		code, body, _ = send(t, h, "POST", "/api/v1/tenants/"+tenant+"/deletion", nil)
		require.Equal(t, 409, code, "%v", body)
		require.Equal(t, "SYS_TENANT_ON_HOLD", code2(body))
		code, again, _ := send(t, h, "PUT", "/api/v1/tenants/"+tenant+"/hold", map[string]any{"reason": "litigation 2026-17"})
		require.Equal(t, 200, code)
		require.Equal(t, hold["held_at"], again["held_at"], "the same hold")
		code, body, _ = send(t, h, "PUT", "/api/v1/tenants/"+tenant+"/hold", map[string]any{"reason": "other"})
		require.Equal(t, 409, code)
		require.Equal(t, "SYS_TENANT_CONFLICT", code2(body))
		code, body, _ = send(t, h, "GET", "/api/v1/holds", nil)
		require.Equal(t, 200, code)
		require.Len(t, body["holds"].([]any), 1)
		code, rel, _ := send(t, h, "DELETE", "/api/v1/tenants/"+tenant+"/hold", nil)
		require.Equal(t, 200, code, "%v", rel)
		require.NotNil(t, rel["released_at"])
		code, _, _ = send(t, h, "DELETE", "/api/v1/tenants/"+tenant+"/hold", nil)
		require.Equal(t, 404, code)
		_, body, _ = send(t, h, "GET", "/api/v1/holds", nil)
		require.Empty(t, body["holds"])
		_, body, _ = send(t, h, "GET", "/api/v1/holds?include_released=true", nil)
		require.Len(t, body["holds"].([]any), 1, "the history keeps it")
		code, body, _ = send(t, h, "GET", "/api/v1/holds?include_released=maybe", nil)
		require.Equal(t, 400, code)
		require.Equal(t, "include_released", field(body))
	})
}

func TestReceiptRoutes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, _ context.Context, st store.Store) {
		tenant := uuid.NewString()
		d := &recordingDeleter{items: map[string]map[string]int64{tenant: {"public.steps": 4, "public.runs": 2}}}
		h, pub := erasureAPI(t, st, deleterSet{"postgres:app": d})
		code, body, _ := send(t, h, "GET", "/api/v1/tenants/"+tenant+"/deletion/receipt", nil)
		require.Equal(t, 404, code)
		require.Equal(t, "SYS_TENANT_NOT_FOUND", code2(body))
		code, _, _ = send(t, h, "POST", "/api/v1/tenants/"+tenant+"/deletion", nil)
		require.Equal(t, 202, code)
		var raw []byte
		testsvc.Eventually(t, 20*time.Second, func() bool {
			code, _, raw = send(t, h, "GET", "/api/v1/tenants/"+tenant+"/deletion/receipt", nil)
			return code == 200
		}, "a receipt once the job is COMPLETED and verified")

		code, key, _ := send(t, h, "GET", "/api/v1/receipts/key", nil)
		require.Equal(t, 200, code, "%v", key)
		require.Equal(t, receipt.KeyID(pub), key["key_id"])
		require.Equal(t, "Ed25519", key["algorithm"])
		keyJSON, err := json.Marshal(key)
		require.NoError(t, err)
		served, err := receipt.ParsePublicKey(keyJSON)
		require.NoError(t, err)
		rep := receipt.Verify(raw, func(string) (ed25519.PublicKey, string, error) { return served, "api", nil }, receipt.Options{})
		require.True(t, rep.Valid, "%+v", rep.Checks)
		require.EqualValues(t, 6, rep.Doc.DeletedTotal)

		code, _, _ = send(t, h, "GET", "/api/v1/receipts/key?key_id="+receipt.KeyID(pub), nil)
		require.Equal(t, 200, code)
		code, body, _ = send(t, h, "GET", "/api/v1/receipts/key?key_id=sha256:00", nil)
		require.Equal(t, 404, code)
		require.Equal(t, "SYS_TENANT_NOT_FOUND", code2(body))
	})
}

// TestTenantRoutesTakeOnlyWhatTheyRead (outside attack): a query parameter
// a tenant route does not read, or data after its body, was ignored:
// `?dry_run=true` on a deletion created a real job. Each is a 400, and no
// job or hold exists afterwards.
func TestTenantRoutesTakeOnlyWhatTheyRead(t *testing.T) {
	st := storetest.Open(t, migrations.SQLite)
	tenant := uuid.NewString()
	d := &recordingDeleter{items: map[string]map[string]int64{tenant: {"t": 4}}}
	h, _ := erasureAPI(t, st, deleterSet{"x": d})
	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/v1/tenants/" + tenant + "/deletion?dry_run=true", ""},
		{"POST", "/api/v1/tenants/" + tenant + "/deletion", `{"not_before":"` + later + `"}} {"not_before":"2099-01-01T00:00:00Z"}`},
		{"PUT", "/api/v1/tenants/" + tenant + "/hold", `{"reason":"x"}]`},
		{"PUT", "/api/v1/tenants/" + tenant + "/hold?dry_run=true", `{"reason":"x"}`},
		{"POST", "/api/v1/deletions?dry_run=true", `{"tenants":["` + tenant + `"]}`},
		// Second attack: what was read as "not given" or as other text.
		{"POST", "/api/v1/tenants/" + tenant + "/deletion?dry_run=true;", ""},
		{"POST", "/api/v1/tenants/" + tenant + "/deletion", `{"plan_hash":""}`},
		{"POST", "/api/v1/tenants/" + tenant + "/deletion", `{"not_before":""}`},
		{"POST", "/api/v1/deletions", `{"tenant_ids":["` + tenant + `"],"not_before":""}`},
		{"POST", "/api/v1/tenants/" + tenant + "/deletion", "\u0085"},
		{"PUT", "/api/v1/tenants/" + tenant + "/hold", "{\"reason\":\"case\xff\"}"},
		{"PUT", "/api/v1/tenants/" + tenant + "/hold", `{"reason":"case\ud800"}`},
	} {
		code, body, _ := send(t, h, c.method, c.path, c.body)
		require.Equal(t, 400, code, "%s %s %s: %v", c.method, c.path, c.body, body)
		require.Equal(t, "SYS_TENANT_VALIDATION_ERROR", code2(body))
	}
	code, _, _ := send(t, h, "GET", "/api/v1/tenants/"+tenant+"/deletion", nil)
	require.Equal(t, 404, code, "no job was created")
	code, _, _ = send(t, h, "GET", "/api/v1/tenants/"+tenant+"/hold", nil)
	require.Equal(t, 404, code, "no hold was placed")
	require.Empty(t, d.tenantsSeen(), "nothing was deleted")
}
