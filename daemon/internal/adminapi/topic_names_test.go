package adminapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/daemon/internal/adminapi"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/bulk"
	"github.com/lifecycled/lifecycled/daemon/internal/pluginhost"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/daemon/internal/store/storetest"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

// handlerDoer answers a client's requests with h, in process.
type handlerDoer struct{ h http.Handler }

func (d handlerDoer) Do(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	d.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// sourceTopicNames are names sources other than Kafka give the places they
// read dead letters from: a RabbitMQ queue with a colon or slashes, a
// table, a name with a space and a letter outside ASCII.
//
// messages, groups and operations are also routes of their own under
// /api/v1/dlq/: the typed client lists a topic under /api/v1/dlq/topics/,
// where every name is a topic.
var sourceTopicNames = []string{"orders:dlq", "orders/order.created", "public.failed_jobs", "Bestellungen dlq/ä",
	"messages", "groups", "operations", "topics", "topics/messages", "a.../..b", "?x#y%z"}

// TestAnyTopicNameASourceReportsWorksInEveryRoute: names that are not Kafka
// topic names were stored and listed by GET /api/v1/dlq, then refused with
// 400 by every route that takes a topic (issue 29). Each now works in
// every route, URL-escaped by the client, and reaches exactly its own
// messages.
func TestAnyTopicNameASourceReportsWorksInEveryRoute(t *testing.T) {
	storetest.Each(t, func(t *testing.T, ctx context.Context, s store.Store) {
		log := hclog.NewNullLogger()
		host := pluginhost.New(pluginhost.Options{}, log, nil) // no source: a real send is a 503
		svc := dlq.NewService(s, host, func() dlq.Policy { return dlq.Policy{MaxRetries: 3, Lease: time.Minute} }, "test", log,
			dlq.NewMetrics(nil, s, nil, nil))
		ops := bulk.NewService(svc, s, log)
		h := adminapi.New(adminapi.Options{
			Logger: log, Policy: func() adminapi.AccessPolicy { return adminapi.AccessPolicy{} },
			Registry: prometheus.NewRegistry(), Gatherer: prometheus.NewRegistry(),
			Routes: []func(*http.ServeMux){adminapi.DLQRoutes(svc, ops), adminapi.DLQSearchRoutes(svc),
				adminapi.DLQTriageRoutes(svc), adminapi.DLQOperationRoutes(ops, svc)},
		}).Handler()
		api := adminclient.New(handlerDoer{h})

		t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
		for n, topic := range sourceTopicNames {
			batch := make([]dlq.Incoming, n+1)
			for i := range batch {
				batch[i] = dlq.Incoming{Position: dlq.LogPosition("rabbitmq", topic, 0, int64(i)),
					OriginalTopic: "orders:main", ErrorMessage: "boom", Payload: []byte(fmt.Sprintf(`{"n":%d}`, i))}
			}
			_, err := s.IngestDLQ(ctx, batch, dlq.IngestOptions{Now: t0, MaxRetries: 3})
			require.NoError(t, err)
		}

		before := storedState(t, ctx, s)

		topics, err := api.Topics(ctx)
		require.NoError(t, err)
		var listed []string
		for _, tp := range topics.Topics {
			listed = append(listed, tp.Topic)
		}
		require.ElementsMatch(t, sourceTopicNames, listed)

		for n, topic := range sourceTopicNames {
			want := int64(n + 1)
			list, err := api.ListMessages(ctx, topic, nil)
			require.NoError(t, err, topic)
			require.Len(t, list.Messages, n+1, topic)
			for _, m := range list.Messages {
				require.Equal(t, topic, m.Topic, "only the topic's own messages")
			}

			found, err := api.Search(ctx, url.Values{"topic": {topic}})
			require.NoError(t, err, topic)
			require.Len(t, found.Messages, n+1, topic)
			for _, m := range found.Messages {
				require.Equal(t, topic, m.Topic, "only the topic's own messages")
			}

			dry, err := api.RetryAll(ctx, topic, true)
			require.NoError(t, err, topic)
			require.Equal(t, want, *dry.Retryable, topic)

			preview, err := api.PreviewOperation(ctx, wire.OperationRequest{Action: "retry",
				Filter: json.RawMessage(fmt.Sprintf(`{"topic":%q}`, topic))})
			require.NoError(t, err, topic)
			require.Equal(t, want, preview.Matched, topic)

			_, err = api.Pause(ctx, topic, "incident 42")
			require.NoError(t, err, topic)
			_, err = api.Resume(ctx, topic)
			require.NoError(t, err, topic)

			// The source is not configured: the send is what fails, with
			// 503, not the name with 400.
			_, err = api.RetryAll(ctx, topic, false)
			require.Equal(t, http.StatusServiceUnavailable, adminclient.StatusOf(err), "%s: %v", topic, err)

			replay, err := api.Replay(ctx, list.Messages[0].ID, &wire.ReplayRequest{Topic: ptr("orders:retry/v2")}, true)
			require.NoError(t, err, topic)
			require.Equal(t, "orders:retry/v2", replay.Replayed.Topic)
		}
		// Dry runs, pauses and a retry-all that could not send change no
		// message of any topic (a send that could not happen is in a
		// message's history, but counts no attempt).
		require.Equal(t, before, storedState(t, ctx, s))
	})
}

// storedState is every stored message as what a call could change:
// status, attempts counted, next retry, payload.
func storedState(t *testing.T, ctx context.Context, s store.Store) map[string]string {
	t.Helper()
	page, err := s.SearchDLQ(ctx, dlq.SearchFilter{Limit: 1000, IncludeArchived: true})
	require.NoError(t, err)
	require.Nil(t, page.Next, "one page holds them all")
	out := map[string]string{}
	for _, m := range page.Messages {
		out[m.ID.String()] = fmt.Sprintf("%s %d %v %q %v %s", m.Status, m.RetryCount, m.NextRetryAt, m.Payload, m.Archived, m.Position)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// TestEveryPathOfATopicListIsAList: /api/v1/dlq/topics/{topic} beside
// /api/v1/dlq/{topic} made ServeMux redirect /api/v1/dlq/topics (a topic
// named topics, which it listed before) to /api/v1/dlq/topics/.
func TestEveryPathOfATopicListIsAList(t *testing.T) {
	h := newHandler(t)
	for _, p := range []string{"/api/v1/dlq/topics", "/api/v1/dlq/topics/topics", "/api/v1/dlq/orders.dlq.v1", "/api/v1/dlq/topics/messages"} {
		status, body := do(h, "GET", p)
		require.Equal(t, http.StatusOK, status, "%s: %v", p, body)
		require.Contains(t, body, "pagination", p)
	}
}
