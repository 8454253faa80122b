package console

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// One outage (the database refuses connections) seen through Kafka,
// RabbitMQ and a failed_jobs table is one error group in the console: its
// row names the three DLQ topics, its bulk retry previews and retries the
// twelve dead letters of the three sources in one operation, each sent to
// its own destination once, and a RabbitMQ message's page shows where the
// source read it and what named its destination. Kafka's 404s stand by
// unchanged.
func TestAnOutageInThreeSourcesIsOneErrorGroupInTheConsole(t *testing.T) {
	t.Parallel()
	const outage = "Connection refused: db-1:5432"
	k := testsvc.Kafka(t, 1)
	k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1")
	for i := 0; i < 6; i++ {
		msg := outage
		if i >= 4 {
			msg = "HTTP 404 Not Found"
		}
		k.Kcat(t, fmt.Sprintf(`{"kafka":%d}`, i)+"\n", "-P", "-t", "orders.dlq.v1", "-H", "kafka_dlt-original-topic=orders.events.v1",
			"-H", "kafka_dlt-exception-fqcn=java.net.ConnectException", "-H", "kafka_dlt-exception-message="+msg)
	}

	mq := testsvc.NewRabbitMQ(t)
	conn, err := amqp.Dial(mq.URL)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.ExchangeDeclare("orders", "direct", true, false, false, false, nil))
	require.NoError(t, ch.ExchangeDeclare("errors", "fanout", true, false, false, false, nil))
	_, err = ch.QueueDeclare("orders.created", true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind("orders.created", "order.created", "orders", false, nil))
	_, err = ch.QueueDeclare("orders:dlq", true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind("orders:dlq", "", "errors", false, nil))
	for i := 0; i < 4; i++ {
		require.NoError(t, ch.PublishWithContext(t.Context(), "errors", "", true, false, amqp.Publishing{
			Body: []byte(fmt.Sprintf(`{"rabbit":%d}`, i)), ContentType: "application/json", DeliveryMode: amqp.Persistent,
			Headers: amqp.Table{"x-exception-message": outage, "x-original-exchange": "orders", "x-original-routingKey": "order.created",
				"x-exception-stacktrace": "org.springframework.amqp.rabbit.support.ListenerExecutionFailedException: Listener threw exception\n" +
					"Caused by: java.net.ConnectException: " + outage + "\n"}}))
	}

	jobs := testsvc.PGDatabase(t)
	pool, err := pgxpool.New(t.Context(), jobs)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(t.Context(), `CREATE TABLE failed_jobs (id UUID PRIMARY KEY DEFAULT gen_random_uuid(), bookmark_id UUID,
		job_type TEXT NOT NULL, error_message TEXT, payload JSONB, failed_at TIMESTAMPTZ DEFAULT NOW(), retryable BOOLEAN DEFAULT TRUE)`)
	require.NoError(t, err)
	_, err = pool.Exec(t.Context(), `INSERT INTO failed_jobs (bookmark_id, job_type, error_message, payload)
		SELECT gen_random_uuid(), 'llm_processing', $1::text, jsonb_build_object('job', i) FROM generate_series(0, 3) i`, outage)
	require.NoError(t, err)
	var reprocessed atomic.Int64
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reprocessed.Add(1)
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(endpoint.Close)

	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Extra: kafkaSource(k.Addr) + fmt.Sprintf(`
[[dlq_source]]
name = "rabbitmq:orders"
plugin = "rabbitmq"
[dlq_source.config]
url = %q
queues = ["orders:dlq"]

# The recoverer's headers name the destination: allowed where it may go.
[[dlq.topic]]
match = "orders:dlq"
replay_targets = ["orders/*"]

[[dlq_source]]
name = "pgtable:bookmarks"
plugin = "pgtable"
[dlq_source.config]
dsn = %q
poll_interval = "100ms"
retry_url = %q
`, mq.URL, jobs, endpoint.URL+"/v1/bookmarks/{bookmark_id}/reprocess")})
	waitStored(t, d, 14)
	bystanders := url.Values{"error": {"404"}, "limit": {"100"}}
	var before apitest.Answer
	apitest.Record(d, &before).Search(t.Context(), bystanders)

	u, base := ui(t, d, nil)
	ctx := tab(t, 3*time.Minute)
	do(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#dlq-depth")),
		chromedp.Click(chromedp.CSS(`nav a[href="/ui/dlq"]`)), chromedp.WaitVisible(chromedp.CSS("#by-error")),
		chromedp.Click(chromedp.CSS("#by-error")), chromedp.WaitVisible(chromedp.CSS(`#by-error[aria-current="true"]`)))
	require.Equal(t, "Error groups", text(t, ctx, "#h-groups"))
	row := `#groups tbody tr:first-child`
	topics := text(t, ctx, row+" td:nth-child(2)")
	for _, topic := range []string{"orders.dlq.v1", "orders:dlq", "failed_jobs"} {
		require.Contains(t, topics, topic, "the error group spans the three sources")
	}
	require.Contains(t, text(t, ctx, row), "Connection refused")
	require.Contains(t, text(t, ctx, row), "java.net.ConnectException")
	// Since when and how fast: the arrivals of the last 24 hours, drawn.
	label, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#groups tbody tr:first-child .arrivals svg").getAttribute("aria-label")`))
	require.NoError(t, err)
	require.Equal(t, "12 in the last 24 hours, per hour", label)
	shot(t, ctx, "error-groups")

	do(t, ctx, chromedp.Click(chromedp.CSS(row+" a.bulk-link")), chromedp.WaitVisible(chromedp.CSS("#bulk-form")),
		chromedp.SetValue(chromedp.CSS("#b-action"), "retry"), chromedp.SetValue(chromedp.CSS("#b-rate"), "20"),
		chromedp.Click(chromedp.CSS("#bulk-preview")), chromedp.WaitVisible(chromedp.CSS("#bulk-preview-result")))
	require.Equal(t, "12", text(t, ctx, "#bulk-matched"), "the outage in the three sources")
	require.Contains(t, text(t, ctx, "#bulk-filter"), "error_group")
	do(t, ctx, chromedp.Click(chromedp.CSS("#bulk-start")), chromedp.WaitVisible(chromedp.CSS("#op-progress")))
	waitJS(t, ctx, `document.getElementById("op-state") && document.getElementById("op-state").textContent === "COMPLETED"`,
		"the retry of the error group to end")
	require.Equal(t, "12", text(t, ctx, "#op-succeeded"))
	require.Equal(t, "0", text(t, ctx, "#op-failed"))

	require.EqualValues(t, 4, k.Records(t, "orders.events.v1"), "Kafka's four back on their topic")
	q, err := ch.QueueDeclarePassive("orders.created", true, false, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, 4, q.Messages, "RabbitMQ's four back on orders/order.created")
	require.EqualValues(t, 4, reprocessed.Load(), "the table's four reprocessed")
	var after apitest.Answer
	apitest.Record(d, &after).Search(t.Context(), bystanders)
	require.JSONEq(t, string(before.Body), string(after.Body), "the 404s are untouched")

	// A RabbitMQ message's page: its position as the source shows it, and
	// what named its destination.
	rabbit := search(t, d, url.Values{"topic": {"orders:dlq"}, "limit": {"1"}}).Messages[0].ID
	do(t, ctx, chromedp.Navigate(base+"/ui/dlq/messages/"+rabbit), chromedp.WaitVisible(chromedp.CSS("main")))
	page := text(t, ctx, "main")
	require.Contains(t, page, "x-original-exchange")
	require.True(t, strings.Contains(page, "orders/order.created"), "the destination: %s", page)
}
