package adminapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/adminapi"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/bulk"
	"github.com/lifecycled/lifecycled/daemon/internal/pluginhost"
)

// TestRepeatedMembersAndParametersAreRefused: a member given twice in a
// body is refused, naming it: encoding/json
// keeps the last one, and matches names to fields whatever their case, so
// {"action": "retry", ..., "ACTION": "delete"} would run a delete that a
// reader of the body may not have seen. A
// single-valued query parameter given twice is refused too. Nothing is
// stored or changed. A payload to replay is the operator's data: what it
// holds is not checked.
func TestRepeatedMembersAndParametersAreRefused(t *testing.T) {
	_, st, id := triageHandler(t)
	log := hclog.NewNullLogger()
	host := pluginhost.New(pluginhost.Options{}, log, nil) // no source
	svc := dlq.NewService(st, host, func() dlq.Policy { return dlq.Policy{MaxRetries: 3} }, "test", log, dlq.NewMetrics(nil, st, nil, nil))
	h := adminapi.New(adminapi.Options{
		Logger: log, Policy: func() adminapi.AccessPolicy { return adminapi.AccessPolicy{} },
		Registry: prometheus.NewRegistry(), Gatherer: prometheus.NewRegistry(),
		Routes: []func(*http.ServeMux){adminapi.DLQRoutes(svc, bulk.NewService(svc, st, log)), adminapi.DLQSearchRoutes(svc), adminapi.DLQTriageRoutes(svc), adminapi.DLQOperationRoutes(bulk.NewService(svc, st, log), svc)},
	}).Handler()
	before, err := st.GetDLQ(context.Background(), mustUUID(t, id))
	require.NoError(t, err)
	replay := "/api/v1/dlq/messages/" + id + "/replay"
	cases := []struct {
		name, method, path, body, field string
	}{
		{"action twice", "POST", "/api/v1/dlq/operations", `{"action":"retry","filter":{"topic":"orders.dlq.v1"},"action":"delete"}`, "action"},
		{"a filter twice", "POST", "/api/v1/dlq/operations", `{"action":"delete","filter":{"topic":"other.dlq.v1","topic":"orders.dlq.v1"}}`, "filter.topic"},
		{"dry_run twice", "POST", "/api/v1/dlq/operations", `{"action":"delete","dry_run":true,"filter":{"topic":"orders.dlq.v1"},"dry_run":false}`, "dry_run"},
		{"action in another case", "POST", "/api/v1/dlq/operations", `{"action":"retry","filter":{"topic":"orders.dlq.v1"},"ACTION":"delete"}`, "ACTION"},
		{"ids with a long s", "POST", "/api/v1/dlq/operations", `{"action":"delete","ids":["` + uuid.NewString() + `"],"id\u017f":["` + id + `"]}`, "idſ"},
		{"a filter in another case", "POST", "/api/v1/dlq/operations", `{"action":"delete","filter":{"topic":"other.dlq.v1","Topic":"orders.dlq.v1"}}`, "filter.Topic"},
		{"limit twice", "GET", "/api/v1/dlq/operations?limit=1&limit=2", "", "limit"},
		{"state twice", "GET", "/api/v1/dlq/operations?state=RUNNING&state=RUNNING", "", "state"},
		{"replay topic twice", "POST", replay + "?dry_run=true", `{"topic":"a.events.v1","topic":"b.events.v1"}`, "topic"},
		{"replay header twice", "POST", replay + "?dry_run=true", `{"headers":{"trace":"t2","trace":"t3"}}`, "headers.trace"},
		// Outside attack: what a route does not read must not pass unseen.
		{"a second object after a closing brace", "POST", "/api/v1/dlq/operations", `{"action":"retry","filter":{"topic":"orders.dlq.v1"}}} {"action":"delete","filter":{"topic":"orders.dlq.v1"}}`, ""},
		{"a bracket after the object", "POST", replay + "?dry_run=true", `{"topic":"a.events.v1"}]`, ""},
		{"a brace after retry-all's body", "POST", "/api/v1/dlq/orders.dlq.v1/retry-all", `{"dry_run":true}}`, ""},
		{"dry_run in an operation's query", "POST", "/api/v1/dlq/operations?dry_run=true", `{"action":"delete","filter":{"topic":"orders.dlq.v1"}}`, "dry_run"},
		{"dry_run in a delete's query", "DELETE", "/api/v1/dlq/messages/" + id + "?dry_run=true", "", "dry_run"},
		{"a body on a delete", "DELETE", "/api/v1/dlq/messages/" + id, `{"dry_run":true}`, ""},
		{"a body on a revive", "POST", "/api/v1/dlq/messages/" + id + "/revive", `{"dry_run":true}`, ""},
		{"an unknown parameter on a pause", "POST", "/api/v1/dlq/orders.dlq.v1/pause?for=1h", "", "for"},
		{"a rate near zero", "POST", "/api/v1/dlq/operations", `{"action":"delete","filter":{"topic":"orders.dlq.v1"},"rate":5e-324}`, "rate"},
		{"a filter member set to null", "POST", "/api/v1/dlq/operations", `{"action":"delete","filter":{"topic":null,"status":["PENDING"]}}`, "filter.topic"},
		{"dry_run set to null", "POST", "/api/v1/dlq/operations", `{"action":"delete","filter":{"topic":"orders.dlq.v1"},"dry_run":null}`, "dry_run"},
		{"a body that is null", "POST", "/api/v1/dlq/orders.dlq.v1/retry-all", `null`, ""},
		// Second attack: a query string or body read as other than sent.
		{"a query url.Query drops (semicolon)", "POST", "/api/v1/dlq/operations?dry_run=true;", `{"action":"delete","filter":{"topic":"orders.dlq.v1"}}`, ""},
		{"a query url.Query drops (bad escape)", "DELETE", "/api/v1/dlq/messages/" + id + "?dry_run=true%", "", ""},
		{"invalid UTF-8 in a replay's key", "POST", replay + "?dry_run=true", "{\"key\":\"k\xff\"}", ""},
		{"a lone surrogate in a replay's header", "POST", replay + "?dry_run=true", `{"headers":{"trace":"\udfff"}}`, ""},
		{"a high surrogate without its low half", "POST", replay + "?dry_run=true", `{"key":"k\ud800x"}`, ""},
		{"a no-break space as the body of a revive", "POST", "/api/v1/dlq/messages/" + id + "/revive", "\u00a0", ""},
		// Third attack: lenient readings made strict.
		{"an id in another spelling", "POST", "/api/v1/dlq/operations", `{"action":"delete","ids":["urn:uuid:` + id + `"]}`, "ids"},
		{"an empty pause reason", "POST", "/api/v1/dlq/orders.dlq.v1/pause", `{"reason":""}`, "reason"},
		{"dry_run spelled F", "POST", "/api/v1/dlq/orders.dlq.v1/retry-all?dry_run=F", "", "dry_run"},
		{"retry-all dry_run twice", "POST", "/api/v1/dlq/orders.dlq.v1/retry-all", `{"dry_run":true,"dry_run":false}`, "dry_run"},
		// Left lenient at the third attack, strict now.
		{"an empty target topic on a delete", "POST", "/api/v1/dlq/operations", `{"action":"delete","filter":{"topic":"orders.dlq.v1"},"target_topic":""}`, "target_topic"},
		{"two statuses in one member", "POST", "/api/v1/dlq/operations", `{"action":"delete","filter":{"status":["DEAD, pending"]}}`, "status"},
		{"a status with a space", "POST", "/api/v1/dlq/operations", `{"action":"delete","filter":{"status":[" PENDING"]}}`, "status"},
		{"a comma before a time's fraction", "GET", "/api/v1/dlq/messages?since=2026-01-01T00:00:00,5Z", "", "since"},
		{"a time past nanoseconds", "GET", "/api/v1/dlq/messages?until=2026-01-01T00:00:00.1234567891Z", "", "until"},
		{"a bulk filter's time with a comma", "POST", "/api/v1/dlq/operations", `{"action":"delete","filter":{"topic":"orders.dlq.v1","since":"2026-01-01T00:00:00,5Z"}}`, "since"},
		// A stored filter cannot keep a NUL (PostgreSQL answered 500 when it
		// stored one, second outside attack): refused the same on both stores.
		{"a NUL in a bulk filter's q", "POST", "/api/v1/dlq/operations", `{"action":"delete","filter":{"q":"\u0000 text"}}`, "q"},
		{"a NUL in a bulk filter's error, dry run", "POST", "/api/v1/dlq/operations", `{"action":"delete","dry_run":true,"filter":{"error":"x\u0000"}}`, "error"},
		{"a NUL in a bulk filter's key", "POST", "/api/v1/dlq/operations", `{"action":"dead","filter":{"key":"\u0000"}}`, "key"},
		{"a NUL in a bulk filter's header", "POST", "/api/v1/dlq/operations", `{"action":"delete","filter":{"header":["tenant=a\u0000b"]}}`, "header"},
		{"a NUL in a bulk filter's topic", "POST", "/api/v1/dlq/operations", `{"action":"delete","filter":{"topic":"orders\u0000"}}`, "topic"},
	}
	for _, c := range cases {
		rec := triageSend(h, c.method, c.path, c.body, nil)
		require.Equal(t, 400, rec.Code, "%s: %s", c.name, rec.Body.String())
		code, msg := envelope(t, rec)
		require.Equal(t, "SYS_DLQ_VALIDATION_ERROR", code, c.name)
		if c.field != "" {
			require.Contains(t, msg, "invalid "+c.field+": ", c.name)
		}
	}
	rec := triageSend(h, "POST", "/api/v1/dlq/operations", `{"action":"delete","filter":{"topic":"orders.dlq.v1"}}`,
		map[string]string{"Content-Encoding": "gzip"})
	require.Equal(t, 400, rec.Code, "a body is read as sent, never as encoded: %s", rec.Body.String())
	rec = triageSend(h, "GET", "/api/v1/dlq/operations", "", nil)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	require.JSONEq(t, `{"operations":[]}`, rec.Body.String(), "a refused request stores nothing")
	after, err := st.GetDLQ(context.Background(), mustUUID(t, id))
	require.NoError(t, err)
	require.Equal(t, before, after, "not deleted, revived or changed")
	ps, err := st.DLQTopicPauses(context.Background())
	require.NoError(t, err)
	require.Empty(t, ps, "not paused")

	rec = triageSend(h, "POST", replay+"?dry_run=true", `{"payload":{"a":1,"a":2}}`, nil)
	require.Equal(t, 200, rec.Code, "a payload's own members are not the body's: %s", rec.Body.String())
	rec = triageSend(h, "POST", replay+"?dry_run=true", `{"payload":null,"headers":{"trace":null}}`, nil)
	require.Equal(t, 200, rec.Code, "on a replay null is documented as not given: %s", rec.Body.String())
	rec = triageSend(h, "POST", replay+"?dry_run=true", `{"key":"k\ud83d\ude00 \\ud800"}`, nil)
	require.Equal(t, 200, rec.Code, "a surrogate pair, and an escaped backslash before text that looks like one: %s", rec.Body.String())
	require.Contains(t, rec.Body.String(), `"key":"k😀 \\ud800"`)
	rec = triageSend(h, "POST", replay+"?dry_run=true", `{"headers":{"Trace":"a","trace":"b"}}`, nil)
	require.Equal(t, 200, rec.Code, "header names are data, matched exactly: %s", rec.Body.String())
	require.Contains(t, rec.Body.String(), `"key":"Trace"`)
	require.Contains(t, rec.Body.String(), `"key":"trace"`)
}
