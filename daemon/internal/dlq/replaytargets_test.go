package dlq

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/sdk"
)

func TestDefaultReplayTargetsFromTheDLQTopicsName(t *testing.T) {
	for topic, want := range map[string][]string{
		"orders.dlq.v1":        {"orders", "orders.*"},
		"payments.card.dlq.v1": {"payments.card", "payments.card.*"},
		"orders-dlt":           {"orders", "orders-*"},
		"orders.DLT":           {"orders", "orders.*"},
		"orders_dead_letter":   {"orders", "orders_*"},
		"orders.deadletters":   {"orders", "orders.*"},
		"dlq.orders.v1":        {"orders", "orders.*"},
		"dlq-orders":           {"orders", "orders-*"},
		"dead.letter.orders":   {"orders", "orders.*"},
		"orders.dead.v1":       nil, // "dead" alone is a word
		"dlq":                  nil,
		"orders.events.v1":     nil,
		"legacy-dead":          nil,
		"":                     nil,
		"weird*name.dlq":       nil, // a glob character in the namespace is not a namespace
		"orders.retry.dlq.dlq": {"orders.retry", "orders.retry.*"},
		"orders..dlq":          {"orders.", "orders..*"},
	} {
		require.Equal(t, want, DefaultReplayTargets(topic), topic)
	}
}

func TestReplayTargetsComeFromThePolicyFirst(t *testing.T) {
	p := Policy{ForTopic: func(topic string) Policy {
		switch topic {
		case "legacy.dlq.v1":
			return Policy{ReplayTargets: []string{"billing.*"}}
		case "closed.dlq.v1":
			return Policy{ReplayTargets: []string{}}
		}
		return Policy{}
	}}
	require.Equal(t, []string{"billing.*"}, ReplayTargetsOf(p, "legacy.dlq.v1"))
	require.Empty(t, ReplayTargetsOf(p, "closed.dlq.v1"))
	require.Equal(t, []string{"orders", "orders.*"}, ReplayTargetsOf(p, "orders.dlq.v1"))
	require.Equal(t, []string{"orders", "orders.*"}, ReplayTargetsOf(Policy{}, "orders.dlq.v1"))
}

// Only what a producer chose (a header) is held to the targets; the
// source's mapping is the operator's configuration.
func TestAHeaderNamedOriginOutsideTheTargetsIsRefused(t *testing.T) {
	at := func(topic string, hs ...string) Incoming {
		d := sdk.DeadLetter{Position: sdk.LogPosition(topic, 0, 0)}
		for i := 0; i+1 < len(hs); i += 2 {
			d.Headers = append(d.Headers, sdk.Header{Key: []byte(hs[i]), Value: []byte(hs[i+1])})
		}
		return interpretKafka(d, "mapped.events", time.Unix(1_800_000_000, 0), nil)
	}
	targets := DefaultReplayTargets("orders.dlq.v1")

	in := at("orders.dlq.v1", "kafka_dlt-original-topic", "payments.events.v1")
	require.True(t, RefuseOutsideTargets(&in, targets))
	require.Empty(t, in.OriginalTopic)
	require.Equal(t, NoOriginalTopicPrefix+"the header kafka_dlt-original-topic names payments.events.v1, outside the replay targets of orders.dlq.v1 (orders, orders.*): "+
		"it is sent only where an operator replays it to (dlq replay ID --topic TOPIC)", in.LastError)
	m := Message{Status: StatusPending, MaxRetries: 3, LastError: in.LastError, Position: in.Position}
	require.False(t, m.IsRetryable())
	require.Contains(t, m.NotRetryableReason(), "--topic")

	for _, h := range []string{"kafka_original-topic", "__connect.errors.topic", "original_topic"} {
		in := at("orders.dlq.v1", h, "payments.events.v1")
		require.True(t, RefuseOutsideTargets(&in, targets), h)
	}
	in = at("orders.dlq.v1", "kafka_dlt-original-topic", "orders.events.v1")
	require.False(t, RefuseOutsideTargets(&in, targets))
	require.Equal(t, "orders.events.v1", in.OriginalTopic)
	in = at("orders.dlq.v1", "kafka_dlt-original-topic", "orders")
	require.False(t, RefuseOutsideTargets(&in, targets), "the namespace itself (Spring's retry topics' origin)")

	in = at("legacy-dead")
	require.False(t, RefuseOutsideTargets(&in, nil), "the source's mapping is trusted")
	require.Equal(t, "mapped.events", in.OriginalTopic)

	in = at("legacy-dead", "original_topic", "anything")
	require.True(t, RefuseOutsideTargets(&in, DefaultReplayTargets("legacy-dead")))
	require.Contains(t, in.LastError, "none: its name follows no dead-letter naming convention")

	in = at("orders.dlq.v1", "kafka_dlt-original-topic", "orders.dlq.v1")
	require.False(t, RefuseOutsideTargets(&in, targets), "already refused by Interpret (its own DLQ topic), with its own reason")
	require.Contains(t, in.LastError, "names the DLQ topic itself")
}

// Found from outside (issue 33): a header naming "orders" followed by 250
// spaces and "payments.events.v1" was cut to 255 bytes and trimmed into
// "orders", a topic the header never named. A name too long to be a topic
// names none.
func TestAnOriginTooLongToBeATopicNamesNone(t *testing.T) {
	long := "orders" + strings.Repeat(" ", 250) + "payments.events.v1"
	in := interpretKafka(sdk.DeadLetter{Position: sdk.LogPosition("orders.dlq.v1", 0, 0),
		Headers: []sdk.Header{{Key: []byte("kafka_dlt-original-topic"), Value: []byte(long)}}}, "orders.events.v1", time.Unix(1_800_000_000, 0), nil)
	require.Empty(t, in.OriginalTopic, "neither the cut name nor the source's mapping")
	require.Contains(t, in.LastError, "kafka_dlt-original-topic names a topic of 274 bytes")
	m := Message{Status: StatusPending, MaxRetries: 3, LastError: in.LastError, Position: in.Position}
	require.False(t, m.IsRetryable())
}
