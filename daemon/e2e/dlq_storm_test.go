package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/daemon/wire"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// A storm of dead letters in Kafka, RabbitMQ and a failed_jobs table at
// once, the same outage (the database refuses connections) behind each,
// triaged in one daemon: one search finds the failures of all three, the
// groups list shows a failure group on each destination and one error group
// that spans the three sources, and one rate-limited bulk retry of that
// error group reaches each original destination once (a Kafka topic, an
// exchange and routing key, the reprocess endpoint), with the RabbitMQ
// plugin killed (-9) and its connections cut during intake. Dead letters
// of other failures on the same topics are bystanders: nothing about them
// changes, and none is sent anywhere.
func TestAStormInThreeSourcesIsTriagedInOnePlace(t *testing.T) {
	t.Parallel()
	const n, others = 150, 5
	const outage = "Connection refused: db-1:5432"
	// Kafka: Spring's dead-letter topic.
	k := testsvc.Kafka(t, 1)
	k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1")
	for i := 0; i < n+others; i++ {
		msg, class := outage, "java.net.ConnectException"
		if i >= n {
			msg, class = "HTTP 404 Not Found", "org.springframework.web.client.HttpClientErrorException"
		}
		k.Kcat(t, fmt.Sprintf(`{"kafka":%d}`, i)+"\n", "-P", "-t", "orders.dlq.v1",
			"-H", "kafka_dlt-exception-message="+msg, "-H", "kafka_dlt-exception-fqcn="+class)
	}
	// RabbitMQ: republished to the dead-letter exchange by Spring AMQP's
	// recoverer, and rejected by a consumer (dead-lettered by the broker).
	mq := testsvc.NewRabbitMQ(t)
	ch := rabbitTopology(t, mq, nil)
	for i := 0; i < n; i++ {
		require.NoError(t, ch.PublishWithContext(t.Context(), "dlx", "", true, false, amqp.Publishing{
			Body: []byte(fmt.Sprintf(`{"rabbit":%d}`, i)), DeliveryMode: amqp.Persistent, ContentType: "application/json",
			Headers: amqp.Table{"x-exception-message": outage, "x-original-exchange": "orders", "x-original-routingKey": "order.created",
				"x-exception-stacktrace": "org.springframework.amqp.rabbit.support.ListenerExecutionFailedException: Listener method threw exception\n" +
					"\tat org.springframework.amqp.rabbit.listener.AbstractMessageListenerContainer.wrapToListenerExecutionFailedExceptionIfNeeded(AbstractMessageListenerContainer.java:1786)\n" +
					"Caused by: java.net.ConnectException: " + outage + "\n\tat java.base/sun.nio.ch.Net.connect0(Native Method)\n"}}))
	}
	var rejected []string
	for i := 0; i < others; i++ {
		rejected = append(rejected, fmt.Sprintf(`{"rejected":%d}`, i))
	}
	deadLetterAll(t, mq, rejected)
	// The failed_jobs table of the source design, and its reprocess endpoint.
	jobs := testsvc.PGDatabase(t)
	pool, err := pgxpool.New(t.Context(), jobs)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(t.Context(), `
		CREATE TABLE failed_jobs (id UUID PRIMARY KEY DEFAULT gen_random_uuid(), bookmark_id UUID, job_type TEXT NOT NULL,
			error_message TEXT, payload JSONB, failed_at TIMESTAMPTZ DEFAULT NOW(), retryable BOOLEAN DEFAULT TRUE)`)
	require.NoError(t, err)
	_, err = pool.Exec(t.Context(), `
		INSERT INTO failed_jobs (bookmark_id, job_type, error_message, payload)
			SELECT gen_random_uuid(), 'llm_processing', CASE WHEN i < $1::int THEN $3::text ELSE 'HTTP 404 Not Found' END,
				jsonb_build_object('job', i) FROM generate_series(0, $1::int + $2::int - 1) i`, n, others, outage)
	require.NoError(t, err)
	var mu sync.Mutex
	reprocessed := map[string]int{}
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		reprocessed[r.URL.Path+" "+string(b)]++
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(endpoint.Close)

	d := startDLQDaemon(t, "sqlite", kafkaSource(k.Addr)+retryBlock(false, "1m")+rabbitSource(mq.URL)+fmt.Sprintf(`
[[dlq_source]]
name = "pgtable:bookmarks"
plugin = "pgtable"
[dlq_source.config]
dsn = %q
where = "retryable"
poll_interval = "100ms"
retry_url = %q
`, jobs, endpoint.URL+"/v1/bookmarks/{bookmark_id}/reprocess"))
	// Disrupt the RabbitMQ source while the storm comes in.
	disruptRabbit(t, d, mq, 4, 200*time.Millisecond)
	for _, topic := range []string{"orders.dlq.v1", "orders:dlq", "failed_jobs"} {
		testsvc.Eventually(t, 2*time.Minute, func() bool { return list(t, d, topic, "").Pagination.TotalCount >= n+others },
			"%s taken in", topic)
	}
	require.Zero(t, queueDepth(t, mq, "orders:dlq"), "every RabbitMQ dead letter acknowledged")

	// One search across the three (once the search index caught up with
	// the storm).
	search := func(v url.Values) []wire.Message {
		var all []wire.Message
		v.Set("limit", "500")
		for {
			var page wire.SearchResult
			apitest.Expect(t, d, 200, &page).Search(t.Context(), v)
			all = append(all, page.Messages...)
			if page.NextCursor == "" {
				return all
			}
			v.Set("cursor", page.NextCursor)
		}
	}
	bySource := func(ms []wire.Message) map[string]int {
		sources := map[string]int{}
		for _, m := range ms {
			sources[m.Source]++
		}
		return sources
	}
	want := map[string]int{"kafka": n, "rabbitmq:orders": n, "pgtable:bookmarks": n}
	var found map[string]int
	testsvc.Eventually(t, time.Minute, func() bool {
		found = bySource(search(url.Values{"error": {"refused"}}))
		return maps.Equal(found, want)
	}, "one search finds the outage in the three sources (%v)", found)
	bystanders := func() string {
		var out []wire.Message
		for _, m := range search(url.Values{}) {
			if !strings.Contains(m.ErrorMessage, "refused") {
				out = append(out, m)
			}
		}
		require.Len(t, out, 3*others)
		b, err := json.Marshal(out)
		require.NoError(t, err)
		return string(b)
	}
	before := bystanders()

	// A failure group on each destination; one error group spans them.
	var groups wire.Groups
	apitest.Expect(t, d, 200, &groups).Groups(t.Context(), url.Values{"sort": {"count"}})
	var errorGroup string
	spanned := map[string]bool{}
	for _, g := range groups.Groups {
		if g.Pattern == "Connection refused: db-<n>:<n>" {
			require.Len(t, g.DLQTopics, 1, "a failure group is one destination's: %+v", g)
			spanned[g.DLQTopics[0]] = true
			errorGroup = g.ErrorGroup
		}
	}
	require.Len(t, spanned, 3, "the outage on each destination: %+v", groups.Groups)
	apitest.Expect(t, d, 200, &groups).Groups(t.Context(), url.Values{"by": {"error"}})
	require.Len(t, groups.Groups, 3, "the outage, the 404s of Kafka and the table, RabbitMQ's rejections: %+v", groups.Groups)
	g := groups.Groups[0]
	require.Equal(t, errorGroup, g.ID)
	require.Equal(t, []string{"failed_jobs", "orders.dlq.v1", "orders:dlq"}, g.DLQTopics)
	require.Equal(t, []string{"java.net.ConnectException", "llm_processing"}, g.ExceptionClasses, "the table's class is its job type")
	require.Len(t, g.Groups, 3)
	require.EqualValues(t, 3*n, g.Counts["PENDING"])

	// The error group retried in one operation, at a rate.
	filter, _ := json.Marshal(map[string]any{"error_group": errorGroup})
	var op wire.Operation
	apitest.Expect(t, d, 202, &op).StartOperation(t.Context(), wire.OperationRequest{Action: "retry", Filter: filter, Rate: new(400.0)})
	require.EqualValues(t, 3*n, op.Matched)
	testsvc.Eventually(t, 2*time.Minute, func() bool { return getOperation(t, d, op.ID).State == "COMPLETED" }, "the retry")
	done := getOperation(t, d, op.ID)
	require.Equal(t, done.Matched, done.Succeeded, "%+v", done)
	require.Equal(t, before, bystanders(), "nothing about the other failures changed")

	// Each original destination got each message of the outage once, and
	// nothing else.
	kafka := map[string]int{}
	for _, m := range consumeKcat(t, k, "orders.events.v1") {
		require.NotNil(t, m.Payload)
		kafka[*m.Payload]++
	}
	require.Len(t, kafka, n)
	for v, c := range kafka {
		require.Equal(t, 1, c, "%s", v)
		require.NotContains(t, v, "rejected")
	}
	rabbit := map[string]int{}
	in := rabbitChannel(t, mq)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for len(rabbit) < n && ctx.Err() == nil {
		m, ok, err := in.Get("orders.created", true)
		require.NoError(t, err)
		if !ok {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		rabbit[string(m.Body)]++
	}
	require.Len(t, rabbit, n, "every RabbitMQ dead letter of the outage back on orders/order.created")
	for v, c := range rabbit {
		require.Equal(t, 1, c, "%s", v)
		require.NotContains(t, v, "rejected", "a bystander was sent")
	}
	require.Zero(t, queueDepth(t, mq, "orders.created"), "nothing more was sent there")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, reprocessed, n, "every failed job of the outage reprocessed, and no other")
	for k, c := range reprocessed {
		require.Equal(t, 1, c, "%s reprocessed once", k)
	}
}
