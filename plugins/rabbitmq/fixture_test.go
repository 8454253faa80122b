package main

import (
	"context"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest"
)

// fixture is a vhost with the topology of a service whose consumer
// rejects what it cannot process: exchange "orders" routes order.created
// to queue orders.created, which dead-letters through exchange "dlx" into
// the dead-letter queue orders:dlq.
type fixture struct {
	mq *testsvc.RabbitMQ
}

const (
	dlq       = "orders:dlq"
	workQueue = "orders.created"
)

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{mq: testsvc.NewRabbitMQ(t)}
	ch := f.channel(t)
	require.NoError(t, ch.ExchangeDeclare("orders", "direct", true, false, false, false, nil))
	require.NoError(t, ch.ExchangeDeclare("dlx", "fanout", true, false, false, false, nil))
	_, err := ch.QueueDeclare(workQueue, true, false, false, false, amqp.Table{"x-dead-letter-exchange": "dlx"})
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind(workQueue, "order.created", "orders", false, nil))
	_, err = ch.QueueDeclare(dlq, true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind(dlq, "", "dlx", false, nil))
	return f
}

// channel is a channel on a connection of its own, closed with the test:
// a test that cuts the plugin's connections cuts the fixture's too.
func (f *fixture) channel(t testing.TB) *amqp.Channel {
	t.Helper()
	conn, err := amqp.Dial(f.mq.URL)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	require.NoError(t, err)
	return ch
}

// HeadersAddedByBroker are the headers RabbitMQ writes when it
// dead-letters a message, and the properties the plugin hands over as
// headers (Type "property").
func (f *fixture) HeadersAddedByBroker() []string {
	return []string{"x-death", "x-first-death-exchange", "x-first-death-queue", "x-first-death-reason",
		"x-last-death-exchange", "x-last-death-queue", "x-last-death-reason", "delivery_mode", "timestamp"}
}

func (f *fixture) Config(testing.TB) map[string]any {
	return map[string]any{"url": f.mq.URL, "queues": []any{dlq}, "heartbeat": "2s"}
}
func (f *fixture) DLQTopic() string       { return dlq }
func (f *fixture) RepublishTopic() string { return "orders/order.created" }

// TypedHeader is an AMQP signed 32-bit integer, which must not come back
// as the text "3".
func (f *fixture) TypedHeader() sdk.Header {
	return sdk.Header{Key: []byte("attempt"), Value: []byte("3"), Type: "int32"}
}

// Produce dead-letters msgs as RabbitMQ does: published to orders, then
// rejected by the consumer of orders.created.
func (f *fixture) Produce(t testing.TB, msgs []plugintest.Produced) {
	t.Helper()
	ctx := testsvc.Context(t, time.Minute)
	ch := f.channel(t)
	for _, m := range msgs {
		p := amqp.Publishing{Headers: amqp.Table{}, Body: m.Value, MessageId: string(m.Key), DeliveryMode: amqp.Persistent,
			Timestamp: time.Unix(1_800_000_000, 0)}
		for _, h := range m.Headers {
			v, err := decodeValue(h.Type, h.Value)
			require.NoError(t, err)
			p.Headers[string(h.Key)] = v
		}
		require.NoError(t, ch.PublishWithContext(ctx, "orders", "order.created", true, false, p))
	}
	for rejected := 0; rejected < len(msgs); {
		d, ok, err := ch.Get(workQueue, false)
		require.NoError(t, err)
		if !ok {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		require.NoError(t, d.Reject(false))
		rejected++
	}
}

// Consume takes n messages from the queue the destination routes to.
func (f *fixture) Consume(t testing.TB, destination string, n int) []plugintest.Produced {
	t.Helper()
	queue := destination
	if destination == f.RepublishTopic() {
		queue = workQueue
	}
	var out []plugintest.Produced
	ch := f.channel(t)
	deadline := time.Now().Add(time.Minute)
	for len(out) < n && time.Now().Before(deadline) {
		d, ok, err := ch.Get(queue, true)
		require.NoError(t, err)
		if !ok {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		p := plugintest.Produced{Value: d.Body}
		if d.MessageId != "" {
			p.Key = []byte(d.MessageId)
		}
		for _, h := range headersOf(d) {
			if h.Type != typeProperty {
				p.Headers = append(p.Headers, h)
			}
		}
		out = append(out, p)
	}
	return out
}

// depth is how many messages queue holds, ready or unacknowledged.
func (f *fixture) depth(t testing.TB, queue string) int {
	t.Helper()
	q, err := f.channel(t).QueueDeclarePassive(queue, true, false, false, false, nil)
	require.NoError(t, err)
	return q.Messages
}

func pluginBinary(t testing.TB) string { return testsvc.Binary(t, "lifecycled-plugin-rabbitmq") }

func configured(t testing.TB, f *fixture) sdk.DLQSource {
	t.Helper()
	p := plugintest.Launch(t, pluginBinary(t), sdk.KindDLQSource)
	s := p.Source(t)
	_, err := s.Configure(testsvc.Context(t, time.Minute), &sdk.ConfigureRequest{Name: "rabbitmq:orders", Config: f.Config(t)})
	require.NoError(t, err)
	return s
}

func fetch(t testing.TB, s sdk.DLQSource, n int) []sdk.DeadLetter {
	t.Helper()
	var out []sdk.DeadLetter
	deadline := time.Now().Add(time.Minute)
	for len(out) < n && time.Now().Before(deadline) {
		resp, err := s.Fetch(context.Background(), &sdk.FetchRequest{Max: n - len(out), Wait: 500 * time.Millisecond})
		require.NoError(t, err)
		out = append(out, resp.Messages...)
	}
	return out
}
