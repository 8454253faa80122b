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

// Found by an outside review: a dead-letter queue deleted and declared
// again (to make it a quorum queue, say) cancels the consumer while the
// connection stays open. The plugin never consumed the queue again, and
// Fetch returned at once, empty, in a busy loop.
func TestAConsumerCancelledByTheBrokerIsStartedAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := configured(t, f)
	resp, err := s.Fetch(context.Background(), &sdk.FetchRequest{Max: 10, Wait: 300 * time.Millisecond})
	require.NoError(t, err)
	require.Empty(t, resp.Messages)

	ch := f.channel(t)
	_, err = ch.QueueDelete(dlq, false, false, false)
	require.NoError(t, err)
	_, err = ch.QueueDeclare(dlq, true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind(dlq, "", "dlx", false, nil))
	f.Produce(t, []plugintest.Produced{{Key: []byte("after"), Value: []byte(`{"order":2}`)}})

	start := time.Now()
	calls, got, failed := 0, 0, 0
	for time.Since(start) < 20*time.Second && got == 0 {
		resp, err := s.Fetch(context.Background(), &sdk.FetchRequest{Max: 10, Wait: 500 * time.Millisecond})
		calls++
		if err != nil {
			failed++
			require.Equal(t, sdk.ClassRetryable, sdk.ClassOf(err), "%v", err)
			continue
		}
		got += len(resp.Messages)
	}
	require.Equal(t, 1, got, "the dead letter of the queue declared again is fetched")
	require.Less(t, calls, 40, "no busy loop: %d calls, %d failed", calls, failed)
}

// Found by an outside review: a string that is not UTF-8 inside a header
// table or array (the .NET client writes a byte[] so, a Java LongString
// can hold raw bytes) came back with U+FFFD in place of its bytes.
func TestNestedStringsThatAreNotUTF8KeepTheirBytes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ch := f.channel(t)
	blob := "\xff\xfe\x00\x01binary"
	orig := amqp.Table{"meta": amqp.Table{"blob": blob}, "list": []any{blob}, "top": blob}
	require.NoError(t, ch.PublishWithContext(testsvc.Context(t, time.Minute), "", dlq, true, false,
		amqp.Publishing{Headers: orig, Body: []byte("b"), MessageId: "m"}))
	s := configured(t, f)
	got := fetch(t, s, 1)
	require.Len(t, got, 1)
	resp, err := s.Republish(testsvc.Context(t, time.Minute), &sdk.RepublishRequest{Messages: []sdk.RepublishMessage{
		{ID: "r", Topic: workQueue, Key: got[0].Key, Value: got[0].Value, Headers: got[0].Headers}}})
	require.NoError(t, err)
	require.True(t, resp.Results[0].Acked, "%v", resp.Results[0].Err)
	d, ok, err := ch.Get(workQueue, true)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, orig["top"], d.Headers["top"])
	require.Equal(t, orig["meta"], d.Headers["meta"], "a nested string's bytes")
	require.Equal(t, orig["list"], d.Headers["list"], "an array's string bytes")
}

// Republishing has a connection of its own: RabbitMQ blocks a publishing
// connection during a memory or disk alarm, and the acknowledgements of
// stored dead letters must not wait behind it (they shared one connection,
// so an alarm held up intake too). Here the publishing connection is cut
// with deliveries handed out: their Commit still acknowledges them, and
// the next Republish connects again.
func TestTheRepublishingConnectionIsNotTheConsumingOne(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.Produce(t, []plugintest.Produced{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: []byte("2")}})
	s := configured(t, f)
	got := fetch(t, s, 2)
	require.Len(t, got, 2)
	send := func() sdk.RepublishResult {
		resp, err := s.Republish(testsvc.Context(t, time.Minute), &sdk.RepublishRequest{Messages: []sdk.RepublishMessage{
			{ID: "r", Topic: "orders/order.created", Value: []byte("again")}}})
		require.NoError(t, err)
		return resp.Results[0]
	}
	require.True(t, send().Acked)
	require.Equal(t, 1, f.mq.CloseConnectionsNamed("lifecycled-plugin-rabbitmq (republish)"), "a connection of its own")

	_, err := s.Commit(testsvc.Context(t, time.Minute), &sdk.CommitRequest{Positions: []sdk.Position{got[0].Position, got[1].Position}})
	require.NoError(t, err, "the consuming connection lives on")
	require.Eventually(t, func() bool { return f.depth(t, dlq) == 0 }, 30*time.Second, 100*time.Millisecond)
	r := send()
	require.True(t, r.Acked, "connected again: %v", r.Err)
}
