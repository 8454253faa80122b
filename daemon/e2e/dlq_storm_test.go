package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/daemon/wire"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// A storm of dead letters in Kafka, RabbitMQ and a failed_jobs table at
// once, triaged in one daemon: one search finds the failures of all three,
// the groups list shows each source's, and a rate-limited bulk retry of
// every group reaches each original destination once (a Kafka topic, an
// exchange and routing key, the reprocess endpoint), with the RabbitMQ
// plugin killed (-9) and its connections cut during intake.
func TestAStormInThreeSourcesIsTriagedInOnePlace(t *testing.T) {
	t.Parallel()
	const n = 150
	// Kafka: Spring's dead-letter topic.
	k := testsvc.Kafka(t, 1)
	k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1")
	for i := 0; i < n; i++ {
		k.Kcat(t, fmt.Sprintf(`{"kafka":%d}`, i)+"\n", "-P", "-t", "orders.dlq.v1",
			"-H", "kafka_dlt-exception-message=Connection refused: db-1:5432",
			"-H", "kafka_dlt-exception-fqcn=java.net.ConnectException")
	}
	// RabbitMQ: rejected by the consumer, dead-lettered by the broker.
	mq := testsvc.NewRabbitMQ(t)
	rabbitTopology(t, mq, nil)
	var bodies []string
	for i := 0; i < n; i++ {
		bodies = append(bodies, fmt.Sprintf(`{"rabbit":%d}`, i))
	}
	deadLetterAll(t, mq, bodies)
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
			SELECT gen_random_uuid(), 'llm_processing', 'connect ECONNREFUSED 10.0.0.' || i || ':443 (connection refused)',
				jsonb_build_object('job', i) FROM generate_series(0, $1 - 1) i`, n)
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
		testsvc.Eventually(t, 2*time.Minute, func() bool { return list(t, d, topic, "").Pagination.TotalCount >= n },
			"%s taken in", topic)
	}
	require.Zero(t, queueDepth(t, mq, "orders:dlq"), "every RabbitMQ dead letter acknowledged")

	// One search across the three (once the search index caught up with
	// the storm): "refused" is in the Kafka and the table's errors, and
	// "rejected" in RabbitMQ's.
	search := func(q string) map[string]int {
		sources := map[string]int{}
		cursor := ""
		for {
			v := url.Values{"error": {q}, "limit": {"500"}}
			if cursor != "" {
				v.Set("cursor", cursor)
			}
			var page wire.SearchResult
			apitest.Expect(t, d, 200, &page).Search(t.Context(), v)
			for _, m := range page.Messages {
				sources[m.Source]++
			}
			if cursor = page.NextCursor; cursor == "" {
				return sources
			}
		}
	}
	var found map[string]int
	testsvc.Eventually(t, time.Minute, func() bool {
		found = search("refused")
		return found["kafka"] == n && found["pgtable:bookmarks"] == n
	}, "one search finds the failures of Kafka and the table (%v)", found)
	testsvc.Eventually(t, time.Minute, func() bool {
		found = search("rejected")
		return found["rabbitmq:orders"] >= n
	}, "and RabbitMQ's (%v)", found)

	// The groups of the three, each retried in bulk at a rate.
	var groups wire.Groups
	apitest.Expect(t, d, 200, &groups).Groups(t.Context(), url.Values{"sort": {"count"}})
	byTopic := map[string]string{}
	for _, g := range groups.Groups {
		for _, dt := range g.DLQTopics {
			byTopic[dt] = g.ID
		}
	}
	require.Len(t, byTopic, 3, "a group of each source: %+v", groups.Groups)
	for topic, group := range byTopic {
		filter, _ := json.Marshal(map[string]any{"group": group})
		var op wire.Operation
		apitest.Expect(t, d, 202, &op).StartOperation(t.Context(), wire.OperationRequest{Action: "retry", Filter: filter, Rate: new(400.0)})
		testsvc.Eventually(t, 2*time.Minute, func() bool { return getOperation(t, d, op.ID).State == "COMPLETED" }, "the retry of %s", topic)
		done := getOperation(t, d, op.ID)
		require.Equal(t, done.Matched, done.Succeeded, "%s: %+v", topic, done)
	}

	// Each original destination got each message once.
	kafka := map[string]int{}
	for _, m := range consumeKcat(t, k, "orders.events.v1") {
		require.NotNil(t, m.Payload)
		kafka[*m.Payload]++
	}
	require.Len(t, kafka, n)
	for v, c := range kafka {
		require.Equal(t, 1, c, "%s", v)
	}
	rabbit := map[string]int{}
	ch := rabbitChannel(t, mq)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stored := list(t, d, "orders:dlq", "").Pagination.TotalCount
	for int64(len(rabbit)) < int64(n) && ctx.Err() == nil {
		m, ok, err := ch.Get("orders.created", true)
		require.NoError(t, err)
		if !ok {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		rabbit[string(m.Body)]++
	}
	require.Len(t, rabbit, n, "every RabbitMQ dead letter back on orders/order.created (%d stored)", stored)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, reprocessed, n, "every failed job reprocessed")
	for k, c := range reprocessed {
		require.Equal(t, 1, c, "%s reprocessed once", k)
	}
}
