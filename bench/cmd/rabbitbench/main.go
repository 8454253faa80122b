// Command rabbitbench measures the rabbitmq source: the intake of a storm
// of dead letters from a RabbitMQ queue into PostgreSQL, and a retry-all
// that republishes them with publisher confirms, each beside what a bare
// amqp091-go client does with the same messages on the same broker in the
// same run (a consumer acknowledging each message; a publisher waiting
// for each confirm, and one pipelining them).
package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os/exec"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/lifecycled/lifecycled/bench/internal/benchkit"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

const dlq = "orders:dlq"

func main() {
	n := flag.Int("n", 20_000, "dead letters")
	prefetch := flag.Int("prefetch", 0, "the source's prefetch (0: its default)")
	flag.Parse()
	benchkit.Header(fmt.Sprintf("rabbitmq source: intake %d, retry-all %d", *n, *n))
	vhost := fmt.Sprintf("rabbitbench-%d", time.Now().UnixNano())
	ctl("add_vhost", vhost)
	defer ctl("delete_vhost", vhost)
	ctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
	amqpURL := "amqp://guest:guest@127.0.0.1:5672/" + vhost
	conn, err := amqp.Dial(amqpURL)
	benchkit.Must(err, "connect to RabbitMQ (make test-deps starts it)")
	defer conn.Close()
	ch, err := conn.Channel()
	benchkit.Must(err, "channel")
	for _, q := range []string{dlq, "baseline:dlq", "orders.created", "baseline.created"} {
		_, err := ch.QueueDeclare(q, true, false, false, false, nil)
		benchkit.Must(err, "declare "+q)
	}
	benchkit.Must(ch.ExchangeDeclare("orders", "direct", true, false, false, false, nil), "exchange")
	benchkit.Must(ch.QueueBind("orders.created", "order.created", "orders", false, nil), "bind")
	benchkit.Must(ch.ExchangeDeclare("baseline", "direct", true, false, false, false, nil), "exchange")
	benchkit.Must(ch.QueueBind("baseline.created", "order.created", "baseline", false, nil), "bind")

	publish(conn, "", dlq, *n)
	publish(conn, "", "baseline:dlq", *n)

	// Baseline: a bare consumer that acknowledges every message on its own,
	// as the source does (the source also confirms its acks with a round
	// trip per batch).
	consume := benchkit.Time(func() { consumeAll(conn, "baseline:dlq", *n) })
	benchkit.Report("baseline: amqp091-go consumer, manual ack per message", "%v (%s)", consume.Round(time.Millisecond),
		benchkit.Rate(int64(*n), consume))

	dsn, drop := benchkit.TempDatabase(context.Background(), benchkit.PGAdmin(), "lcd_rabbitbench")
	defer drop()
	d := benchkit.StartDaemon(benchkit.DaemonConfig{DirPrefix: "rabbitb", State: dsn, ReceiptKey: true, Timeout: 10 * time.Minute, ReadyTries: 600,
		Rest: fmt.Sprintf(`[archive]
enabled = false
[[dlq_source]]
name = "rabbitmq:orders"
plugin = "rabbitmq"
[dlq_source.config]
url = %q
queues = [%q]
%s
[[dlq.topic]]
match = %q
replay_targets = ["orders/*"]
`, amqpURL, dlq, prefetchLine(*prefetch), dlq)})
	defer func() { d.Stop() }()
	intake := waitStored(d, *n)
	benchkit.Report(fmt.Sprintf("intake %d into PostgreSQL (stored and acknowledged)", *n), "%v (%s); ratio to the bare consumer %.2fx",
		intake.Round(time.Millisecond), benchkit.Rate(int64(*n), intake), intake.Seconds()/consume.Seconds())

	var res wire.RetryAllResult
	retry := benchkit.Time(func() {
		var err error
		res, err = d.API.RetryAll(context.Background(), dlq, false)
		benchkit.Must(err, "retry-all")
	})
	if res.Retried != *n {
		benchkit.Must(fmt.Errorf("retried %d of %d", res.Retried, *n), "retry-all")
	}
	one := benchkit.Time(func() { publishConfirmed(conn, "baseline", "order.created", *n, 1) })
	pipelined := benchkit.Time(func() { publishConfirmed(conn, "baseline", "order.created", *n, 1000) })
	benchkit.Report("baseline: amqp091-go publisher, mandatory, waiting for each confirm", "%v (%s)", one.Round(time.Millisecond), benchkit.Rate(int64(*n), one))
	benchkit.Report("baseline: amqp091-go publisher, mandatory, 1000 confirms in flight", "%v (%s)", pipelined.Round(time.Millisecond), benchkit.Rate(int64(*n), pipelined))
	benchkit.Report(fmt.Sprintf("retry-all %d (each confirmed and routed)", *n), "%v (%s); ratio to one confirm at a time %.2fx, to pipelined confirms %.2fx",
		retry.Round(time.Millisecond), benchkit.Rate(int64(res.Retried), retry), retry.Seconds()/one.Seconds(), retry.Seconds()/pipelined.Seconds())
}

func ctl(args ...string) {
	out, err := exec.Command("rabbitmqctl", append([]string{"-q"}, args...)...).CombinedOutput()
	benchkit.Must(err, "rabbitmqctl "+strings.Join(args, " ")+": "+string(out))
}

// publish puts n dead letters into queue, as RabbitMQ dead-letters them
// (an x-death header, a message id, JSON), with confirms.
func publish(conn *amqp.Connection, exchange, queue string, n int) {
	ch, err := conn.Channel()
	benchkit.Must(err, "channel")
	defer ch.Close()
	benchkit.Must(ch.Confirm(false), "confirm mode")
	var pending []*amqp.DeferredConfirmation
	now := time.Now().UTC().Truncate(time.Second)
	for i := 0; i < n; i++ {
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), exchange, queue, false, false, amqp.Publishing{
			MessageId: fmt.Sprintf("order-%d", i), ContentType: "application/json", DeliveryMode: amqp.Persistent,
			Body: []byte(fmt.Sprintf(`{"order_id":%d,"amount":1250,"currency":"EUR","note":"dead-lettered by the consumer"}`, i)),
			Headers: amqp.Table{
				"x-death": []any{amqp.Table{"count": int64(1), "reason": "rejected", "queue": "orders.created", "time": now,
					"exchange": "orders", "routing-keys": []any{"order.created"}}},
				"x-first-death-exchange": "orders", "x-first-death-queue": "orders.created", "x-first-death-reason": "rejected",
			}})
		benchkit.Must(err, "publish")
		pending = append(pending, dc)
		if len(pending) == 1000 || i == n-1 {
			for _, p := range pending {
				if !p.Wait() {
					benchkit.Must(fmt.Errorf("nacked"), "publish")
				}
			}
			pending = pending[:0]
		}
	}
}

func consumeAll(conn *amqp.Connection, queue string, n int) {
	ch, err := conn.Channel()
	benchkit.Must(err, "channel")
	defer ch.Close()
	benchkit.Must(ch.Qos(2000, 0, false), "qos")
	msgs, err := ch.Consume(queue, "", false, false, false, false, nil)
	benchkit.Must(err, "consume")
	for i := 0; i < n; i++ {
		d := <-msgs
		benchkit.Must(d.Ack(false), "ack")
	}
}

// publishConfirmed publishes n messages with mandatory, at most inFlight
// unconfirmed at a time.
func publishConfirmed(conn *amqp.Connection, exchange, key string, n, inFlight int) {
	ch, err := conn.Channel()
	benchkit.Must(err, "channel")
	defer ch.Close()
	benchkit.Must(ch.Confirm(false), "confirm mode")
	var pending []*amqp.DeferredConfirmation
	for i := 0; i < n; i++ {
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), exchange, key, true, false, amqp.Publishing{
			MessageId: fmt.Sprintf("order-%d", i), ContentType: "application/json", DeliveryMode: amqp.Persistent,
			Body: []byte(fmt.Sprintf(`{"order_id":%d,"amount":1250,"currency":"EUR","note":"dead-lettered by the consumer"}`, i))})
		benchkit.Must(err, "publish")
		pending = append(pending, dc)
		if len(pending) == inFlight || i == n-1 {
			for _, p := range pending {
				if !p.Wait() {
					benchkit.Must(fmt.Errorf("nacked"), "publish")
				}
			}
			pending = pending[:0]
		}
	}
}

// waitStored is how long the daemon took to store n dead letters, from the
// first one stored.
func waitStored(d *benchkit.Daemon, n int) time.Duration {
	var start time.Time
	for {
		body, err := d.API.ListMessages(context.Background(), dlq, url.Values{"page_size": {"1"}})
		benchkit.Must(err, "list")
		got := body.Pagination.TotalCount
		if got > 0 && start.IsZero() {
			start = time.Now()
		}
		if got >= int64(n) {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func prefetchLine(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("prefetch = %d", n)
}
