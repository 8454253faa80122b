package main

import (
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	plugintest.RunDLQSource(t, plugintest.SourceOptions{
		Binary:  pluginBinary(t),
		Fixture: f,
		BadConfigs: map[string]map[string]any{
			"no url":        {"queues": []any{dlq}},
			"bad url":       {"url": "http://127.0.0.1:5672/", "queues": []any{dlq}},
			"no queues":     {"url": f.mq.URL},
			"missing queue": {"url": f.mq.URL, "queues": []any{"no-such-queue"}},
			"twice":         {"url": f.mq.URL, "queues": []any{dlq, dlq}},
			"bad prefetch":  {"url": f.mq.URL, "queues": []any{dlq}, "prefetch": 0},
			"unknown key":   {"url": f.mq.URL, "queues": []any{dlq}, "queue": dlq},
		},
	})
}

// What RabbitMQ wrote when it dead-lettered the message is its origin: the
// exchange and routing key it was first published to, the reason, how
// often and since when it failed.
func TestTheOriginIsWhatXDeathSays(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.Produce(t, []plugintest.Produced{{Key: []byte("m1"), Value: []byte(`{"order":1}`)}})
	s := configured(t, f)
	got := fetch(t, s, 1)
	require.Len(t, got, 1)
	o := got[0].Origin
	require.Equal(t, "orders/order.created", o.Destination)
	require.Equal(t, "x-death", o.DestinationFrom)
	require.False(t, o.DestinationConfigured, "the message named it")
	require.Equal(t, "rejected", o.ErrorClass)
	require.Equal(t, "dead-lettered from queue orders.created: rejected", o.ErrorMessage)
	require.Equal(t, 1, o.Attempts)
	require.WithinDuration(t, time.Now(), o.FirstFailedAt, time.Minute)
	require.False(t, got[0].Redelivered)
	require.Equal(t, []byte("m1"), got[0].Key, "the message id stands for the key")
	require.Equal(t, time.Unix(1_800_000_000, 0).UTC(), got[0].Timestamp.UTC(), "the message's own timestamp")
	require.Len(t, got[0].Position.ID, 16)
	require.Equal(t, "message-id m1", got[0].Position.Display)
}

// A connection cut between fetch and acknowledgement: the commit says the
// broker will deliver them again, and it does, flagged, at new
// positions; acknowledged then, the queue is empty. Nothing lost.
func TestAConnectionCutBeforeTheAckRedeliversFlagged(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var sent []plugintest.Produced
	for i := 0; i < 20; i++ {
		sent = append(sent, plugintest.Produced{Key: []byte{'k', byte('a' + i)}, Value: []byte{byte(i)}})
	}
	f.Produce(t, sent)
	s := configured(t, f)
	first := fetch(t, s, 20)
	require.Len(t, first, 20)

	f.mq.CloseConnections()
	var positions []sdk.Position
	for _, m := range first {
		positions = append(positions, m.Position)
	}
	_, err := s.Commit(testsvc.Context(t, time.Minute), &sdk.CommitRequest{Positions: positions})
	require.Error(t, err, "the deliveries' channel is gone: nothing was acknowledged")
	require.Equal(t, sdk.ClassRetryable, sdk.ClassOf(err))

	again := fetch(t, s, 20)
	require.Len(t, again, 20)
	byKey := map[string][]byte{}
	for _, m := range first {
		byKey[string(m.Key)] = m.Position.ID
	}
	positions = nil
	for _, m := range again {
		require.True(t, m.Redelivered, "%s", m.Key)
		require.NotEqual(t, byKey[string(m.Key)], m.Position.ID, "a new delivery, a new position")
		positions = append(positions, m.Position)
	}
	_, err = s.Commit(testsvc.Context(t, time.Minute), &sdk.CommitRequest{Positions: positions})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return f.depth(t, dlq) == 0 }, 30*time.Second, 100*time.Millisecond)
}

// Republish goes to the exchange and routing key with confirms: a message
// no queue takes, or to an exchange that does not exist, fails
// permanently, and the others of the batch are still sent.
func TestRepublishRefusesWhatNothingRoutes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := configured(t, f)
	resp, err := s.Republish(testsvc.Context(t, time.Minute), &sdk.RepublishRequest{Messages: []sdk.RepublishMessage{
		{ID: "unroutable", Topic: "orders/no.such.key", Value: []byte("x")},
		{ID: "no exchange", Topic: "nowhere/order.created", Value: []byte("x")},
		{ID: "ok", Topic: "orders/order.created", Key: []byte("id-1"), Value: []byte("y"),
			Headers: []sdk.Header{{Key: []byte("n"), Value: []byte("7"), Type: "int64"}, {Key: []byte("content_type"), Value: []byte("application/json"), Type: typeProperty}}},
		{ID: "to a queue", Topic: workQueue, Value: []byte("z")},
	}})
	require.NoError(t, err)
	require.False(t, resp.Results[0].Acked)
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(resp.Results[0].Err))
	require.Contains(t, resp.Results[0].Err.Error(), "unroutable")
	require.False(t, resp.Results[1].Acked)
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(resp.Results[1].Err))
	require.Contains(t, resp.Results[1].Err.Error(), `no exchange "nowhere"`)
	require.True(t, resp.Results[2].Acked, "%v", resp.Results[2].Err)
	require.True(t, resp.Results[3].Acked, "the default exchange routes a bare name to its queue: %v", resp.Results[3].Err)

	d, ok, err := f.channel(t).Get(workQueue, true)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "id-1", d.MessageId)
	require.Equal(t, "application/json", d.ContentType)
	require.Equal(t, int64(7), d.Headers["n"], "an int64 stays an int64")
	require.Equal(t, uint8(amqp.Persistent), d.DeliveryMode)
}

// A quorum queue adds x-delivery-count to a message it delivers again: a
// header of the delivery, not of the message. Left in, a redelivery would
// differ from what was stored, and be stored a second time.
func TestAQuorumQueueRedeliveryHasTheFirstDeliverysContent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ch := f.channel(t)
	_, err := ch.QueueDeclare("quorum:dlq", true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind("quorum:dlq", "", "dlx", false, nil))
	f.Produce(t, []plugintest.Produced{{Key: []byte("q1"), Value: []byte("{}"),
		Headers: []sdk.Header{{Key: []byte("trace"), Value: []byte("abc")}}}})
	p := plugintest.Launch(t, pluginBinary(t), sdk.KindDLQSource)
	s := p.Source(t)
	cfg := f.Config(t)
	cfg["queues"] = []any{"quorum:dlq"}
	_, err = s.Configure(testsvc.Context(t, time.Minute), &sdk.ConfigureRequest{Name: "rabbitmq", Config: cfg})
	require.NoError(t, err)
	first := fetch(t, s, 1)
	require.Len(t, first, 1)
	f.mq.CloseConnections()
	again := fetch(t, s, 1)
	require.Len(t, again, 1)
	require.True(t, again[0].Redelivered)
	require.Equal(t, first[0].Headers, again[0].Headers, "the same content on every delivery")
	require.Equal(t, first[0].Value, again[0].Value)
}
