package adminapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/adminapi"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/bulk"
	"github.com/lifecycled/lifecycled/daemon/internal/pluginhost"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
)

// searchHandler serves the search routes over s, with dead letters of two
// failures on orders and one on payments stored.
func searchHandler(t *testing.T, ctx context.Context, s store.Store) http.Handler {
	log := hclog.NewNullLogger()
	host := pluginhost.New(pluginhost.Options{}, log, nil)
	svc := dlq.NewService(s, host, func() dlq.Policy { return dlq.Policy{MaxRetries: 3, Lease: time.Minute} }, "test", log,
		dlq.NewMetrics(nil, s, nil, nil))
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	for i := 0; i < 12; i++ {
		in := dlq.Incoming{
			Position:      dlq.LogPosition("kafka", "orders.dlq.v1", 0, int64(i)),
			OriginalTopic: "orders.events.v1",
			ErrorMessage:  fmt.Sprintf("dial tcp 10.0.0.%d:5432: connect: connection refused", i),
			Key:           []byte(fmt.Sprintf("order-%d", i)),
			Headers:       []dlq.Header{{Key: []byte("kafka_dlt-exception-fqcn"), Value: []byte("java.net.ConnectException")}},
			Origin:        dlq.Origin{ErrorClass: "java.net.ConnectException", From: "the header kafka_dlt-original-topic"},
			Payload:       []byte(fmt.Sprintf(`{"order_id":"ORD-%d"}`, i)),
		}
		if i >= 8 {
			in.Position.Topic, in.OriginalTopic = "payments.dlq.v1", "payments.events.v1"
			in.ErrorMessage = fmt.Sprintf("HTTP 503 Service Unavailable (request %d)", i)
			in.Headers = nil
			in.Payload = []byte{0xff, 0xfe, byte(i)}
		}
		_, err := s.IngestDLQ(ctx, []dlq.Incoming{in}, dlq.IngestOptions{Now: t0.Add(time.Duration(i) * time.Minute), MaxRetries: 3})
		require.NoError(t, err)
	}
	return adminapi.New(adminapi.Options{
		Logger: log, Policy: func() adminapi.AccessPolicy { return adminapi.AccessPolicy{} },
		Registry: prometheus.NewRegistry(), Gatherer: prometheus.NewRegistry(),
		Routes: []func(*http.ServeMux){adminapi.DLQRoutes(svc, bulk.NewService(svc, s, log)), adminapi.DLQSearchRoutes(svc)},
	}).Handler()
}

func TestSearchRouteFiltersPagesAndShapes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		h := searchHandler(t, ctx, s)
		status, body := do(h, "GET", "/api/v1/dlq/messages")
		require.Equal(t, 200, status, "%v", body)
		require.EqualValues(t, 12, body["total"])
		require.Equal(t, false, body["total_is_estimate"])
		require.Equal(t, "", body["next_cursor"])
		msgs := body["messages"].([]any)
		require.Len(t, msgs, 12)
		first := msgs[0].(map[string]any)
		require.Equal(t, "payments.dlq.v1", first["dlq_topic"], "newest first")
		require.Equal(t, false, first["archived"])
		require.Nil(t, first["payload"], "binary payload: null")
		require.NotNil(t, first["payload_base64"])
		g := first["group"].(string)
		require.Len(t, g, 16)

		// Group filter from the groups list.
		status, body = do(h, "GET", "/api/v1/dlq/groups?sort=count")
		require.Equal(t, 200, status, "%v", body)
		groups := body["groups"].([]any)
		require.Len(t, groups, 2)
		top := groups[0].(map[string]any)
		require.Equal(t, "java.net.ConnectException", top["exception_class"])
		require.Equal(t, "dial tcp <ip>:<n>: connect: connection refused", top["pattern"])
		require.Equal(t, []any{"orders.events.v1"}, top["original_topics"])
		require.EqualValues(t, 8, top["counts"].(map[string]any)["PENDING"])
		require.EqualValues(t, 0, top["counts"].(map[string]any)["DEAD"])
		require.Equal(t, "2026-11-01T12:00:00.000+00:00", top["first_seen"])
		require.Equal(t, "2026-11-01T12:07:00.000+00:00", top["last_seen"])
		status, body = do(h, "GET", "/api/v1/dlq/messages?group="+top["id"].(string)+"&limit=3&order=oldest")
		require.Equal(t, 200, status, "%v", body)
		require.EqualValues(t, 8, body["total"])
		var keys []any
		for page := 0; ; page++ {
			for _, m := range body["messages"].([]any) {
				keys = append(keys, m.(map[string]any)["key"])
			}
			c := body["next_cursor"].(string)
			if c == "" {
				break
			}
			require.Less(t, page, 3)
			status, body = do(h, "GET", "/api/v1/dlq/messages?group="+top["id"].(string)+"&limit=3&order=oldest&cursor="+url.QueryEscape(c))
			require.Equal(t, 200, status, "%v", body)
		}
		require.Equal(t, []any{"order-0", "order-1", "order-2", "order-3", "order-4", "order-5", "order-6", "order-7"}, keys)

		// Combined filters, statuses as a comma list and repeated.
		status, body = do(h, "GET", "/api/v1/dlq/messages?topic=orders.events.v1&status=pending,dead&status=RETRYING&error=REFUSED&q=ord-3&key=order-3&header=kafka_dlt-exception-fqcn=java.net.ConnectException&since=2026-11-01T12:00:00Z&until=2026-11-01T14:00:00%2B01:00")
		require.Equal(t, 200, status, "%v", body)
		require.Len(t, body["messages"].([]any), 1)
		status, body = do(h, "GET", "/api/v1/dlq/messages?topic=orders.events.v1&until=2026-11-01T12:03:00Z")
		require.Equal(t, 200, status, "%v", body)
		require.Len(t, body["messages"].([]any), 3, "until is exclusive")

		// The seed's routes still answer as before, and a message shows its group.
		status, body = do(h, "GET", "/api/v1/dlq/orders.dlq.v1?page_size=1")
		require.Equal(t, 200, status)
		m := body["messages"].([]any)[0].(map[string]any)
		require.Equal(t, top["id"], m["group"])
		require.Equal(t, m["topic"], m["dlq_topic"])
	})
}

func TestSearchRouteBadFiltersAre400NamingTheField(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		h := searchHandler(t, ctx, s)
		_, ok := do(h, "GET", "/api/v1/dlq/messages?limit=2")
		cursor := ok["next_cursor"].(string)
		require.NotEmpty(t, cursor)
		cases := map[string]struct{ path, field string }{
			"unknown parameter":      {"/api/v1/dlq/messages?stauts=DEAD", "stauts"},
			"unknown status":         {"/api/v1/dlq/messages?status=PENDING,LOST", "status"},
			"empty status":           {"/api/v1/dlq/messages?status=", "status"},
			"limit 0":                {"/api/v1/dlq/messages?limit=0", "limit"},
			"limit 1001":             {"/api/v1/dlq/messages?limit=1001", "limit"},
			"limit words":            {"/api/v1/dlq/messages?limit=ten", "limit"},
			"limit twice":            {"/api/v1/dlq/messages?limit=1&limit=2", "limit"},
			"bad topic":              {"/api/v1/dlq/messages?topic=a%00b", "topic"},
			"bad group":              {"/api/v1/dlq/messages?group=XYZ", "group"},
			"group upper case":       {"/api/v1/dlq/messages?group=0123456789ABCDEF", "group"},
			"empty error":            {"/api/v1/dlq/messages?error=", "error"},
			"huge q":                 {"/api/v1/dlq/messages?q=" + string(make([]byte, 0)) + longText(2000), "q"},
			"header without name":    {"/api/v1/dlq/messages?header==x", "header"},
			"since not a time":       {"/api/v1/dlq/messages?since=yesterday", "since"},
			"until before since":     {"/api/v1/dlq/messages?since=2026-11-02T00:00:00Z&until=2026-11-01T00:00:00Z", "until"},
			"include_archived maybe": {"/api/v1/dlq/messages?include_archived=maybe", "include_archived"},
			"order sideways":         {"/api/v1/dlq/messages?order=random", "order"},
			"cursor garbage":         {"/api/v1/dlq/messages?cursor=abc", "cursor"},
			"cursor of other filter": {"/api/v1/dlq/messages?limit=2&status=PENDING&cursor=" + cursor, "cursor"},
			"cursor of other order":  {"/api/v1/dlq/messages?limit=2&order=oldest&cursor=" + cursor, "cursor"},
			"groups unknown":         {"/api/v1/dlq/groups?group=abc", "group"},
			"groups sort":            {"/api/v1/dlq/groups?sort=size", "sort"},
			"groups limit":           {"/api/v1/dlq/groups?limit=0", "limit"},
			"groups status":          {"/api/v1/dlq/groups?status=GONE", "status"},
			"groups topic":           {"/api/v1/dlq/groups?topic=..", "topic"},
			"groups by":              {"/api/v1/dlq/groups?by=source", "by"},
			"groups by twice":        {"/api/v1/dlq/groups?by=error&by=failure", "by"},
			"bad error group":        {"/api/v1/dlq/messages?error_group=outage", "error_group"},
			"error group upper":      {"/api/v1/dlq/messages?error_group=0123456789ABCDEF", "error_group"},
		}
		for name, tc := range cases {
			status, body := do(h, "GET", tc.path)
			require.Equal(t, 400, status, "%s: %v", name, body)
			require.Equal(t, "SYS_DLQ_VALIDATION_ERROR", code(body), name)
			details := body["error"].(map[string]any)["details"].([]any)
			require.Equal(t, tc.field, details[0].(map[string]any)["field"], name)
		}
		// The same cursor with its own filter is fine.
		status, body := do(h, "GET", "/api/v1/dlq/messages?limit=5&cursor="+cursor)
		require.Equal(t, 200, status, "%v", body)
		require.Len(t, body["messages"].([]any), 5)
	})
}

func longText(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a'
	}
	return string(b)
}
