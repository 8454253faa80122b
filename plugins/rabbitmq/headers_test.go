package main

import (
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/sdk"
)

// Every AMQP field type comes back as the type it was, nested tables and
// arrays included (x-death is an array of tables), and every property but
// user_id (which the broker checks against the publishing user).
func TestHeadersAndPropertiesRoundTripWithTheirTypes(t *testing.T) {
	when := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	table := amqp.Table{
		"s": "text", "b": []byte{0, 0xff}, "t": true, "i8": int8(-8), "u8": uint8(8), "i16": int16(-16), "u16": uint16(16),
		"i32": int32(-32), "u32": uint32(32), "i64": int64(-64), "f32": float32(1.5), "f64": 2.25,
		"d": amqp.Decimal{Scale: 2, Value: 12345}, "ts": when, "void": nil,
		"x-death": []any{amqp.Table{"count": int64(3), "reason": "rejected", "routing-keys": []any{"a", "b"}, "time": when}},
		"nested":  amqp.Table{"inner": amqp.Table{"n": int32(1)}, "empty": []any{}},
	}
	d := amqp.Delivery{Headers: table, ContentType: "application/json", ContentEncoding: "gzip", DeliveryMode: 2, Priority: 5,
		CorrelationId: "c-1", ReplyTo: "replies", Expiration: "60000", MessageId: "m-1", Timestamp: when, Type: "order.created",
		UserId: "app", AppId: "orders-service", Body: []byte("{}")}
	hs := headersOf(d)
	for i := 1; i < len(hs); i++ {
		if hs[i-1].Type != typeProperty && hs[i].Type != typeProperty {
			require.Less(t, string(hs[i-1].Key), string(hs[i].Key), "sorted: one order on every delivery")
		}
	}
	p, err := publishing(sdk.RepublishMessage{Key: keyOf(d), Headers: hs, Value: d.Body})
	require.NoError(t, err)
	require.Equal(t, table, p.Headers)
	require.Equal(t, amqp.Publishing{Headers: table, ContentType: "application/json", ContentEncoding: "gzip", DeliveryMode: 2,
		Priority: 5, CorrelationId: "c-1", ReplyTo: "replies", Expiration: "60000", MessageId: "m-1", Timestamp: when,
		Type: "order.created", AppId: "orders-service", Body: []byte("{}")}, p)

	byKey := map[string]sdk.Header{}
	for _, h := range hs {
		byKey[string(h.Key)] = h
	}
	require.Equal(t, sdk.Header{Key: []byte("i32"), Value: []byte("-32"), Type: "int32"}, byKey["i32"])
	require.Equal(t, sdk.Header{Key: []byte("s"), Value: []byte("text")}, byKey["s"], "a string is plain bytes")
	require.Equal(t, "12345e-2", string(byKey["d"].Value))
	require.Nil(t, byKey["void"].Value, "void is null")
	require.Equal(t, sdk.Header{Key: []byte("user_id"), Value: []byte("app"), Type: typeProperty}, byKey["user_id"], "shown")
}

// What a header cannot be is refused with its name, never sent as
// something else.
func TestAHeaderThatIsNotWhatItsTypeSaysIsRefused(t *testing.T) {
	for _, h := range []sdk.Header{
		{Key: []byte("n"), Value: []byte("x"), Type: "int32"},
		{Key: []byte("n"), Value: []byte("99999999999"), Type: "int32"},
		{Key: []byte("n"), Value: []byte("1.5"), Type: "decimal"},
		{Key: []byte("n"), Value: []byte("{"), Type: typeTable},
		{Key: []byte("n"), Value: []byte("v"), Type: "money"},
		{Key: []byte("priority"), Value: []byte("300"), Type: typeProperty},
	} {
		_, err := publishing(sdk.RepublishMessage{Headers: []sdk.Header{h}})
		require.Error(t, err, "%+v", h)
	}
}

func TestDestinations(t *testing.T) {
	for _, tc := range []struct{ exchange, key, dest string }{
		{"orders", "order.created", "orders/order.created"},
		{"", "orders.created", "orders.created"},
		{"a/b", "k/with/slashes", "a%2Fb/k/with/slashes"},
		{"orders", "", "orders/"},
		{"", "billing/invoices", "/billing/invoices"},
	} {
		require.Equal(t, tc.dest, destination(tc.exchange, tc.key))
		ex, key, err := parseDestination(tc.dest)
		require.NoError(t, err)
		require.Equal(t, tc.exchange, ex)
		require.Equal(t, tc.key, key)
	}
	_, _, err := parseDestination("a%zz/key")
	require.Error(t, err, "not path-escaped")
}

// Spring AMQP's RepublishMessageRecoverer names the origin in headers of
// its own; without x-death and without those, nothing names one.
func TestOriginOfSpringRecovererAndOfNothing(t *testing.T) {
	o := originOf(amqp.Table{springExchange: "orders", springRoutingKey: "order.created", springMessage: "Listener threw",
		springStack: "org.springframework.amqp.rabbit.support.ListenerExecutionFailedException: Listener method threw\n\tat x.y(Z.java:1)\n" +
			"Caused by: org.example.OrderException: bad order\n\tat org.example.Listener.on(Listener.java:42)"})
	require.Equal(t, sdk.Origin{Destination: "orders/order.created", DestinationFrom: "the headers x-original-exchange and x-original-routingKey",
		ErrorMessage: "Listener threw", ErrorClass: "org.example.OrderException"}, o, "the root cause, not Spring's wrapper")
	require.Equal(t, sdk.Origin{}, originOf(amqp.Table{"anything": "else"}))
}

// A retry loop: the work queue rejects into a wait queue, whose TTL
// expires it back to the work exchange, three times, then the work queue
// rejects it into the DLQ. x-death has the newest entry first. The origin
// is where it was first published; the failure and its count are the
// work queue's rejections, not the wait queue's expiries.
func TestTheOriginOfARetryLoop(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	o := originOf(amqp.Table{
		"x-death": []any{
			amqp.Table{"queue": "orders.created", "reason": "rejected", "count": int64(4), "exchange": "orders",
				"routing-keys": []any{"order.created"}, "time": t0},
			amqp.Table{"queue": "orders.wait", "reason": "expired", "count": int64(3), "exchange": "retry",
				"routing-keys": []any{"order.created"}, "time": t0.Add(time.Second)},
		},
		"x-first-death-queue": "orders.created", "x-first-death-reason": "rejected", "x-first-death-exchange": "orders",
	})
	require.Equal(t, sdk.Origin{Destination: "orders/order.created", DestinationFrom: "x-death", ErrorClass: "rejected",
		ErrorMessage: "dead-lettered from queue orders.created: rejected", Attempts: 4, FirstFailedAt: t0}, o)
}
