package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/daemon/wire"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// Issue 33 case 3: anyone who can write to a DLQ topic chose, with a
// header, the topic lifecycled republished the message to with its own
// broker credentials (orders.dlq.v1 -> payments.events.v1, nobody acting).
// A DLQ topic now returns its messages only to its replay targets (by
// default its own namespace, from its name; [[dlq.topic]] replay_targets
// otherwise). A message whose header names any other topic is stored,
// flagged, never republished automatically or by a plain retry, and goes
// where an operator explicitly sends it.
func TestADeadLetterCannotChooseWhereItIsRepublished(t *testing.T) {
	t.Parallel()
	k := testsvc.Kafka(t, 1)
	k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1", "payments.events.v1", "legacy.dlq.v1", "legacy.events.v1", "billing.events")
	produceSync(t, k, &kgo.Record{Topic: "payments.events.v1", Key: []byte("p-1"), Value: []byte(`{"amount":100}`)})
	policy := `
[[dlq.topic]]
match = "legacy.dlq.v1"
replay_targets = ["billing.*"]
`
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Extra: kafkaSource(k.Addr) + retryBlock(true, "300ms") + policy})

	rec := func(topic, key string, hs ...string) *kgo.Record {
		r := &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(`{"k":"` + key + `"}`)}
		for i := 0; i+1 < len(hs); i += 2 {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: hs[i], Value: []byte(hs[i+1])})
		}
		return r
	}
	produceSync(t, k,
		rec("orders.dlq.v1", "spring-elsewhere", "kafka_dlt-original-topic", "payments.events.v1", "kafka_dlt-exception-message", "boom"),
		rec("orders.dlq.v1", "connect-elsewhere", "__connect.errors.topic", "payments.events.v1"),
		rec("orders.dlq.v1", "own-namespace", "kafka_dlt-original-topic", "orders.events.v1"),
		rec("legacy.dlq.v1", "configured", "original_topic", "billing.events"),
		rec("legacy.dlq.v1", "not-configured", "original_topic", "legacy.events.v1"),
	)

	byKey := func() map[string]messageJSON {
		out := map[string]messageJSON{}
		for _, topic := range []string{"orders.dlq.v1", "legacy.dlq.v1"} {
			for _, m := range allMessages(t, d, topic) {
				out[string(m.key(t))] = m
			}
		}
		return out
	}
	var got map[string]messageJSON
	testsvc.Eventually(t, time.Minute, func() bool {
		got = byKey()
		return len(got) == 5 && got["own-namespace"].Status == "RESOLVED" && got["configured"].Status == "RESOLVED"
	}, "the two messages inside their targets are republished (%v)", got)

	for key, named := range map[string]string{"spring-elsewhere": "payments.events.v1", "connect-elsewhere": "payments.events.v1", "not-configured": "legacy.events.v1"} {
		m := getMessage(t, d, got[key].ID)
		require.Equal(t, "PENDING", m.Status, key)
		require.Zero(t, m.RetryCount, "%s: never attempted", key)
		require.Empty(t, m.OriginalTopic, "%s: nowhere to go by itself", key)
		require.NotNil(t, m.LastError, key)
		require.Contains(t, *m.LastError, "outside the replay targets", key)
		require.Contains(t, *m.LastError, named, "%s: the flag names the topic the message asked for", key)
		code, body := apitest.Refused(apitest.Client(d).RetryMessage(t.Context(), m.ID))(t)
		require.Equal(t, 409, code, "%s: a plain retry is refused: %s", key, body)
		require.Contains(t, string(body), "--topic", "%s: the refusal says how to send it", key)
	}

	// What must not change: the topic the hostile headers named.
	payments := consumeRecords(t, k, "payments.events.v1", 1)
	require.Equal(t, "p-1", string(payments[0].Key), "payments.events.v1 holds only its own record")
	require.Len(t, consumeRecords(t, k, "orders.events.v1", 1), 1)
	require.Len(t, consumeRecords(t, k, "billing.events", 1), 1)
	end, err := kadm.NewClient(k.Client(t)).ListEndOffsets(testsvc.Context(t, time.Minute), "legacy.events.v1", "payments.events.v1")
	require.NoError(t, err)
	require.EqualValues(t, 0, end["legacy.events.v1"][0].Offset, "legacy.events.v1 got nothing")
	require.EqualValues(t, 1, end["payments.events.v1"][0].Offset, "payments.events.v1 got nothing more")

	text := metrics(t, d)
	require.Contains(t, text, `lifecycled_dlq_replay_target_refused_total{topic="orders.dlq.v1"} 2`)
	require.Contains(t, text, `lifecycled_dlq_replay_target_refused_total{topic="legacy.dlq.v1"} 1`)

	// An operator sends one where it belongs, explicitly.
	apitest.Expect(t, d, 200, nil).Replay(t.Context(), got["spring-elsewhere"].ID, &wire.ReplayRequest{Topic: new("orders.events.v1")}, false)
	orders := consumeRecords(t, k, "orders.events.v1", 2)
	require.Equal(t, "spring-elsewhere", string(orders[1].Key))
}

// Found from outside (issue 33): messages stored under wider targets were
// republished after a reload narrowed them, because the targets were only
// checked at intake. They are checked again before every send.
func TestNarrowedReplayTargetsHoldForMessagesAlreadyStored(t *testing.T) {
	t.Parallel()
	k := testsvc.Kafka(t, 1)
	k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1", "orders.legacy.v1", "payments.events.v1")
	wide := "\n[[dlq.topic]]\nmatch = \"orders.dlq.v1\"\nreplay_targets = [\"orders.*\", \"payments.events.v1\"]\n"
	narrow := "\n[[dlq.topic]]\nmatch = \"orders.dlq.v1\"\nreplay_targets = [\"orders.events.v1\"]\n"
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Extra: kafkaSource(k.Addr) + retryBlock(false, "1m") + wide})
	rec := func(key, header, topic string) *kgo.Record {
		return &kgo.Record{Topic: "orders.dlq.v1", Key: []byte(key), Value: []byte(`{}`), Headers: []kgo.RecordHeader{{Key: header, Value: []byte(topic)}}}
	}
	produceSync(t, k, rec("payments", "kafka_dlt-original-topic", "payments.events.v1"), rec("legacy", "original_topic", "orders.legacy.v1"),
		rec("events", "original_topic", "orders.events.v1"))
	stored := waitTotal(t, d, "orders.dlq.v1", 3, time.Minute)
	for _, m := range stored.Messages {
		require.NotEmpty(t, m.OriginalTopic, "inside the wide targets at intake")
	}

	b, err := os.ReadFile(d.ConfigPath)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(d.ConfigPath, []byte(strings.Replace(string(b), wide, narrow, 1)), 0o600))
	stdout, stderr, code := d.CLI("reload")
	require.Equal(t, 0, code, "%s%s", stdout, stderr)
	apitest.Expect(t, d, 200, nil).RetryAll(t.Context(), "orders.dlq.v1", false)

	byKey := map[string]messageJSON{}
	testsvc.Eventually(t, time.Minute, func() bool {
		for _, m := range allMessages(t, d, "orders.dlq.v1") {
			byKey[string(m.key(t))] = getMessage(t, d, m.ID)
		}
		return byKey["events"].Status == "RESOLVED" && byKey["payments"].RetryCount >= 1 && byKey["legacy"].RetryCount >= 1
	}, "the reload's targets apply: one sent, two refused")
	for _, key := range []string{"payments", "legacy"} {
		require.Equal(t, "PENDING", byKey[key].Status, key)
		require.NotNil(t, byKey[key].LastError)
		require.Contains(t, *byKey[key].LastError, "outside the replay targets of orders.dlq.v1 (orders.events.v1): not sent", key)
	}
	end, err := kadm.NewClient(k.Client(t)).ListEndOffsets(testsvc.Context(t, time.Minute), "payments.events.v1", "orders.legacy.v1", "orders.events.v1")
	require.NoError(t, err)
	require.EqualValues(t, 0, end["payments.events.v1"][0].Offset, "payments.events.v1 got nothing")
	require.EqualValues(t, 0, end["orders.legacy.v1"][0].Offset, "orders.legacy.v1 got nothing")
	require.EqualValues(t, 1, end["orders.events.v1"][0].Offset)
}
