package adminapi_test

import (
	"bytes"
	"context"
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
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/bulk"
	"github.com/lifecycled/lifecycled/daemon/internal/pluginhost"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
	"github.com/lifecycled/lifecycled/daemon/wire"
	"github.com/lifecycled/lifecycled/migrations"
)

// triageHandler serves the DLQ and triage routes, with Idempotency-Key on,
// over a real SQLite store holding one message with binary bytes.
func triageHandler(t *testing.T) (http.Handler, store.Store, string) {
	st := storetest.Open(t, migrations.SQLite)
	log := hclog.NewNullLogger()
	host := pluginhost.New(pluginhost.Options{}, log, nil) // no source: a real replay is a 503
	svc := dlq.NewService(st, host, func() dlq.Policy { return dlq.Policy{MaxRetries: 3, Lease: time.Minute} }, "test", log,
		dlq.NewMetrics(nil, st, nil, nil))
	_, err := st.IngestDLQ(context.Background(), []dlq.Incoming{{
		Position: dlq.LogPosition("kafka", "orders.dlq.v1", 0, 3), OriginalTopic: "orders.events.v1",
		ErrorMessage: "boom", Key: []byte{0xff}, Payload: []byte(`{"n":1}`),
		Headers: []dlq.Header{{Key: []byte("h\xff"), Value: []byte{0}}, {Key: []byte("trace"), Value: []byte("t1")}},
	}}, dlq.IngestOptions{Now: time.Now(), MaxRetries: 3})
	require.NoError(t, err)
	msgs, _, err := st.ListDLQ(context.Background(), dlq.ListFilter{Topic: "orders.dlq.v1", Page: 1, PageSize: 1})
	require.NoError(t, err)
	srv := adminapi.New(adminapi.Options{
		Logger: log, Policy: func() adminapi.AccessPolicy { return adminapi.AccessPolicy{} },
		Registry: prometheus.NewRegistry(), Gatherer: prometheus.NewRegistry(),
		Routes: []func(*http.ServeMux){adminapi.DLQRoutes(svc, bulk.NewService(svc, st, log)), adminapi.DLQTriageRoutes(svc)},
		Idempotency: &adminapi.IdempotencyOptions{Store: st, TTL: func() time.Duration { return time.Hour },
			MismatchStatus: func() int { return 409 }, LockTimeout: func() time.Duration { return time.Minute }},
	})
	return srv.Handler(), st, msgs[0].ID.String()
}

func triageSend(h http.Handler, method, target, body string, headers map[string]string) *httptest.ResponseRecorder {
	var rd *bytes.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	} else {
		rd = bytes.NewReader(nil)
	}
	req := httptest.NewRequest(method, "http://localhost"+target, rd)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func envelope(t *testing.T, rec *httptest.ResponseRecorder) (string, string) {
	t.Helper()
	var b struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &b), rec.Body.String())
	return b.Error.Code, b.Error.Message
}

// Bad input is a 400 naming what is wrong, unknown things a 404, a replay
// without a running source a 503; none of them changes the message.
func TestTriageRoutesRefuseBadInput(t *testing.T) {
	h, st, id := triageHandler(t)
	before, err := st.GetDLQ(context.Background(), mustUUID(t, id))
	require.NoError(t, err)
	cases := []struct {
		name, method, path, body string
		status                   int
		code, contains           string
	}{
		{"replay non-uuid", "POST", "/api/v1/dlq/messages/nope/replay", "", 400, "SYS_DLQ_VALIDATION_ERROR", ""},
		{"both payloads", "POST", "/api/v1/dlq/messages/" + id + "/replay", `{"payload":{},"payload_base64":"AA=="}`, 400, "SYS_DLQ_VALIDATION_ERROR", "payload"},
		{"bad base64", "POST", "/api/v1/dlq/messages/" + id + "/replay", `{"payload_base64":"%%%"}`, 400, "SYS_DLQ_VALIDATION_ERROR", "payload_base64"},
		{"unknown field", "POST", "/api/v1/dlq/messages/" + id + "/replay", `{"payloads":{}}`, 400, "SYS_DLQ_VALIDATION_ERROR", "payloads"},
		{"not an object", "POST", "/api/v1/dlq/messages/" + id + "/replay", `[1]`, 400, "SYS_DLQ_VALIDATION_ERROR", ""},
		{"two objects", "POST", "/api/v1/dlq/messages/" + id + "/replay", `{} {}`, 400, "SYS_DLQ_VALIDATION_ERROR", ""},
		{"bad topic", "POST", "/api/v1/dlq/messages/" + id + "/replay", `{"topic":"a\u0000b"}`, 400, "SYS_DLQ_VALIDATION_ERROR", "topic"},
		{"DLQ topic", "POST", "/api/v1/dlq/messages/" + id + "/replay", `{"topic":"orders.dlq.v1"}`, 400, "SYS_DLQ_VALIDATION_ERROR", "DLQ topic"},
		{"reserved header", "POST", "/api/v1/dlq/messages/" + id + "/replay", `{"headers":{"x-dlq-id":"1"}}`, 400, "SYS_DLQ_VALIDATION_ERROR", "reserved"},
		{"empty header name", "POST", "/api/v1/dlq/messages/" + id + "/replay", `{"headers":{"":"1"}}`, 400, "SYS_DLQ_VALIDATION_ERROR", "headers"},
		{"bad dry_run", "POST", "/api/v1/dlq/messages/" + id + "/replay?dry_run=maybe", "", 400, "SYS_DLQ_VALIDATION_ERROR", "dry_run"},
		{"unknown message", "POST", "/api/v1/dlq/messages/550e8400-e29b-41d4-a716-446655440000/replay", "", 404, "SYS_DLQ_NOT_FOUND", "dlq message not found"},
		{"no source", "POST", "/api/v1/dlq/messages/" + id + "/replay", "", 503, "SYS_DLQ_SOURCE_UNAVAILABLE", "not configured"},
		{"history non-uuid", "GET", "/api/v1/dlq/messages/nope/history", "", 400, "SYS_DLQ_VALIDATION_ERROR", ""},
		{"history unknown", "GET", "/api/v1/dlq/messages/550e8400-e29b-41d4-a716-446655440000/history", "", 404, "SYS_DLQ_NOT_FOUND", "dlq message not found"},
		{"pause bad topic", "POST", "/api/v1/dlq/a%1Bb/pause", "", 400, "SYS_DLQ_VALIDATION_ERROR", ""},
		{"pause unknown field", "POST", "/api/v1/dlq/orders.dlq.v1/pause", `{"why":"x"}`, 400, "SYS_DLQ_VALIDATION_ERROR", "why"},
		{"resume with a body", "POST", "/api/v1/dlq/orders.dlq.v1/resume", `{"x":1}`, 400, "SYS_DLQ_VALIDATION_ERROR", "empty"},
		{"resume not paused", "POST", "/api/v1/dlq/orders.dlq.v1/resume", "", 404, "SYS_DLQ_NOT_FOUND", "not paused"},
	}
	for _, c := range cases {
		rec := triageSend(h, c.method, c.path, c.body, nil)
		require.Equal(t, c.status, rec.Code, "%s: %s", c.name, rec.Body.String())
		code, msg := envelope(t, rec)
		require.Equal(t, c.code, code, c.name)
		require.Contains(t, msg, c.contains, c.name)
	}
	after, err := st.GetDLQ(context.Background(), mustUUID(t, id))
	require.NoError(t, err)
	require.Equal(t, before, after)
	ps, err := st.DLQTopicPauses(context.Background())
	require.NoError(t, err)
	require.Empty(t, ps)
}

// The contract: a dry-run replay answers the stored message unchanged and
// the message it would send; the history lists events; pause and resume
// answer their documented bodies, show in GET /api/v1/dlq, and take an
// Idempotency-Key like every POST.
func TestTriageRoutesContract(t *testing.T) {
	h, st, id := triageHandler(t)
	rec := triageSend(h, "POST", "/api/v1/dlq/messages/"+id+"/replay?dry_run=true",
		`{"payload":{"fixed": true},"headers":{"trace":"t2"},"key":"k2"}`, map[string]string{"Idempotency-Key": "replay-1"})
	require.Equal(t, 200, rec.Code, rec.Body.String())
	var rep map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &rep))
	require.Equal(t, true, rep["dry_run"])
	require.Equal(t, []any{"payload", "key", "headers"}, rep["changed"])
	orig := rep["original"].(map[string]any)
	require.Equal(t, id, orig["id"])
	require.Equal(t, map[string]any{"n": 1.0}, orig["payload"])
	require.Equal(t, "/w==", orig["key_base64"])
	replayed := rep["replayed"].(map[string]any)
	require.Equal(t, "orders.events.v1", replayed["topic"])
	require.Equal(t, "k2", replayed["key"])
	require.Equal(t, map[string]any{"fixed": true}, replayed["payload"])
	hs := replayed["headers"].([]any)
	require.Len(t, hs, 4)
	require.Equal(t, map[string]any{"key": nil, "key_base64": "aP8=", "value": "\x00"}, hs[0])
	require.Equal(t, map[string]any{"key": "trace", "value": "t2"}, hs[1])
	require.Equal(t, "x-dlq-replay-of", hs[2].(map[string]any)["key"])
	again := triageSend(h, "POST", "/api/v1/dlq/messages/"+id+"/replay?dry_run=true",
		`{"payload":{"fixed": true},"headers":{"trace":"t2"},"key":"k2"}`, map[string]string{"Idempotency-Key": "replay-1"})
	require.Equal(t, "true", again.Header().Get("Idempotent-Replayed"))
	require.Equal(t, rec.Body.String(), again.Body.String())

	rec = triageSend(h, "GET", "/api/v1/dlq/messages/"+id+"/history", "", nil)
	require.Equal(t, 200, rec.Code)
	var hist struct {
		Events []struct {
			At     string         `json:"at"`
			Kind   string         `json:"kind"`
			Detail map[string]any `json:"detail"`
			UID    *uint32        `json:"uid"`
		} `json:"events"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &hist))
	require.Len(t, hist.Events, 1, "a dry run is not recorded")
	require.Equal(t, "intake", hist.Events[0].Kind)
	require.Equal(t, "orders.dlq.v1", hist.Events[0].Detail["topic"])
	require.Equal(t, "p0@3", hist.Events[0].Detail["position"])
	require.Nil(t, hist.Events[0].UID)
	require.Contains(t, rec.Body.String(), `"uid":null`)

	rec = triageSend(h, "POST", "/api/v1/dlq/orders.dlq.v1/pause", `{"reason":"bad deploy 42"}`, map[string]string{"Idempotency-Key": "p-1"})
	require.Equal(t, 200, rec.Code, rec.Body.String())
	var pb map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &pb))
	require.Equal(t, true, pb["paused"])
	require.Equal(t, true, pb["created"])
	require.Equal(t, "bad deploy 42", pb["pause"].(map[string]any)["reason"])
	require.Equal(t, false, pb["pause"].(map[string]any)["auto"])
	again = triageSend(h, "POST", "/api/v1/dlq/orders.dlq.v1/pause", `{"reason":"bad deploy 42"}`, map[string]string{"Idempotency-Key": "p-1"})
	require.Equal(t, "true", again.Header().Get("Idempotent-Replayed"))
	mismatch := triageSend(h, "POST", "/api/v1/dlq/orders.dlq.v1/pause", `{"reason":"other"}`, map[string]string{"Idempotency-Key": "p-1"})
	require.Equal(t, 409, mismatch.Code)
	rec = triageSend(h, "POST", "/api/v1/dlq/orders.dlq.v1/pause", "", nil)
	require.Equal(t, 200, rec.Code)
	pb = nil
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &pb))
	require.Nil(t, pb["created"], "paused already")
	require.Equal(t, "bad deploy 42", pb["pause"].(map[string]any)["reason"], "the first pause stays")

	rec = triageSend(h, "GET", "/api/v1/dlq", "", nil)
	var topics struct {
		Topics []wire.Topic `json:"topics"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &topics))
	require.Len(t, topics.Topics, 1)
	require.NotNil(t, topics.Topics[0].Paused)
	require.Equal(t, "bad deploy 42", topics.Topics[0].Paused.Reason)

	rec = triageSend(h, "POST", "/api/v1/dlq/orders.dlq.v1/resume", "", nil)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	pb = nil
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &pb))
	require.Equal(t, false, pb["paused"])
	ps, err := st.DLQTopicPauses(context.Background())
	require.NoError(t, err)
	require.Empty(t, ps)
}

func mustUUID(t *testing.T, s string) uuid.UUID {
	t.Helper()
	id, err := uuid.Parse(s)
	require.NoError(t, err)
	return id
}
