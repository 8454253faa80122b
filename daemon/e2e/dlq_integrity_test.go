package e2e

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// A header copied by a framework (Kafka Streams propagates them) carried the
// x-dlq-id of another topic's RESOLVED record: the new dead letter was never
// stored and the other record went back to PENDING with its error replaced.
func TestCopiedDLQIDIsStoredAsANewDeadLetter(t *testing.T) {
	t.Parallel()
	for _, state := range []string{"sqlite", "postgres"} {
		t.Run(state, func(t *testing.T) {
			k := testsvc.Kafka(t, 1)
			k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1", "billing.dlq.v1", "billing.events.v1")
			d := startDLQDaemon(t, state, kafkaSource(k.Addr)+retryBlock(false, "1m"))

			k.Kcat(t, `{"order":1}`+"\n", "-P", "-t", "orders.dlq.v1", "-H", "error=order failed")
			k.Kcat(t, `{"order":2}`+"\n", "-P", "-t", "orders.dlq.v1", "-H", "error=never retried")
			orders := byOffset(allMessages(t, d, "orders.dlq.v1"))
			testsvc.Eventually(t, time.Minute, func() bool {
				orders = byOffset(allMessages(t, d, "orders.dlq.v1"))
				return len(orders) == 2
			}, "orders stored")
			resolved, pending := orders[0], orders[1]
			var retried map[string]any
			apitest.Expect(t, d, 200, &retried).RetryMessage(t.Context(), resolved.ID)
			require.Equal(t, "RESOLVED", retried["status"])
			beforeResolved, beforePending := getMessage(t, d, resolved.ID), getMessage(t, d, pending.ID)

			// Another topic's dead letter carrying the RESOLVED record's id.
			k.Kcat(t, `{"invoice":9}`+"\n", "-P", "-t", "billing.dlq.v1", "-H", "x-dlq-id="+resolved.ID, "-H", "error=billing failed")
			// A dead letter on the same topic with the id of a record never republished.
			k.Kcat(t, `{"order":3}`+"\n", "-P", "-t", "orders.dlq.v1", "-H", "x-dlq-id="+pending.ID, "-H", "error=copied by a stream")

			billing := waitTotal(t, d, "billing.dlq.v1", 1, time.Minute)
			waitTotal(t, d, "orders.dlq.v1", 3, time.Minute)
			b := getMessage(t, d, billing.Messages[0].ID)
			require.NotEqual(t, resolved.ID, b.ID)
			require.Equal(t, "billing failed", b.ErrorMessage)
			require.Equal(t, "PENDING", b.Status)
			require.Zero(t, b.RetryCount)
			require.Contains(t, b.headers(t), rawHeader{[]byte("x-dlq-id"), []byte(resolved.ID)}, "the header is kept")
			copied := byOffset(allMessages(t, d, "orders.dlq.v1"))[2]
			require.Equal(t, "copied by a stream", copied.ErrorMessage)

			// The records whose ids were copied did not change at all.
			require.Equal(t, beforeResolved, getMessage(t, d, resolved.ID))
			require.Equal(t, beforePending, getMessage(t, d, pending.ID))
		})
	}
}

// 120 dead letters of 50 KB are 6 MB, more than gRPC's default 4 MiB: every
// retry-all answered 503 and blamed a source that was up. One message the
// original topic cannot take (1.5 MB against its 1 MB limit) must fail alone.
func TestRetryAllOfLargeMessagesSplitsByBytesAndFailsAnOversizedOneAlone(t *testing.T) {
	t.Parallel()
	k := testsvc.Kafka(t, 1)
	createTopic(t, k, "orders.dlq.v1", 1, map[string]string{"max.message.bytes": "4194304"})
	k.CreateTopics(t, 1, "orders.events.v1")
	var recs []*kgo.Record
	for i := 0; i < 120; i++ {
		v := bytes.Repeat([]byte{byte('a' + i%26)}, 50<<10)
		recs = append(recs, &kgo.Record{Topic: "orders.dlq.v1", Key: []byte(strconv.Itoa(i)), Value: v,
			Headers: []kgo.RecordHeader{{Key: "error", Value: []byte("consumer failed")}}})
	}
	recs = append(recs, &kgo.Record{Topic: "orders.dlq.v1", Key: []byte("big"), Value: bytes.Repeat([]byte("B"), 1500<<10),
		Headers: []kgo.RecordHeader{{Key: "error", Value: []byte("too big for the consumer")}}})
	produceSyncBatch(t, k, 3_500_000, recs...)

	d := startDLQDaemon(t, "sqlite", kafkaSource(k.Addr)+retryBlock(false, "1m"))
	waitTotal(t, d, "orders.dlq.v1", 121, 2*time.Minute)

	var res map[string]any
	apitest.Expect(t, d, 200, &res).RetryAll(t.Context(), "orders.dlq.v1", false)
	require.Equal(t, 120.0, res["retried"], "%v", res)
	require.Equal(t, 1.0, res["failed"], "%v", res)

	big := byOffset(allMessages(t, d, "orders.dlq.v1"))[120]
	big = getMessage(t, d, big.ID)
	require.Equal(t, "PENDING", big.Status)
	require.Equal(t, 1, big.RetryCount, "the refusal counts as an attempt")
	require.Equal(t, "too big for the consumer", big.ErrorMessage, "the consumer's error is kept")
	require.NotNil(t, big.LastError)
	require.Contains(t, *big.LastError, "too large")

	got := consumeRecords(t, k, "orders.events.v1", 120)
	seen := map[string]bool{}
	for _, r := range got {
		i, err := strconv.Atoi(string(r.Key))
		require.NoError(t, err)
		require.Equal(t, bytes.Repeat([]byte{byte('a' + i%26)}, 50<<10), r.Value)
		seen[string(r.Key)] = true
	}
	require.Len(t, seen, 120)
}

func deadAfterOneAttempt() string {
	return `
[retry]
enabled = false
max_retries = 1
initial_delay = "1m"
max_delay = "2h"
poll_interval = "200ms"
lease = "2s"
`
}

func TestReviveGivesADeadMessageAnotherChance(t *testing.T) {
	t.Parallel()
	for _, state := range []string{"sqlite", "postgres"} {
		t.Run(state, func(t *testing.T) {
			k := testsvc.Kafka(t, 1)
			createTopic(t, k, "orders.dlq.v1", 1, map[string]string{"max.message.bytes": "4194304"})
			k.CreateTopics(t, 1, "orders.events.v1")
			produceSyncBatch(t, k, 3_500_000, &kgo.Record{Topic: "orders.dlq.v1", Value: bytes.Repeat([]byte("B"), 1500<<10),
				Headers: []kgo.RecordHeader{{Key: "error", Value: []byte("consumer failed")}}})
			d := startDLQDaemon(t, state, kafkaSource(k.Addr)+deadAfterOneAttempt())
			id := waitTotal(t, d, "orders.dlq.v1", 1, time.Minute).Messages[0].ID

			code, body := apitest.Refused(apitest.Client(d).RetryMessage(t.Context(), id))(t)
			require.Equal(t, 502, code, "%s", body)
			dead := getMessage(t, d, id)
			require.Equal(t, "DEAD", dead.Status)
			require.NotNil(t, dead.LastError, "why it died is on the message")
			require.Contains(t, *dead.LastError, "too large")
			require.Len(t, dead.Attempts, 1)
			require.Equal(t, "dead", dead.Attempts[0].Outcome)
			require.Contains(t, dead.Attempts[0].Error, "too large")
			require.Equal(t, "manual", dead.Attempts[0].Trigger)

			var revived map[string]any
			apitest.Expect(t, d, 200, &revived).ReviveMessage(t.Context(), id)
			require.Equal(t, id, revived["id"])
			require.Equal(t, "PENDING", revived["status"])
			m := getMessage(t, d, id)
			require.Equal(t, "PENDING", m.Status)
			require.Zero(t, m.RetryCount)
			require.Len(t, m.Attempts, 2, "the history is kept")
			require.Equal(t, "revived", m.Attempts[1].Outcome)
			require.NotNil(t, m.Attempts[1].UID)
			require.EqualValues(t, os.Getuid(), *m.Attempts[1].UID)
			revive := apitest.PathOf(func(c *adminclient.Client) { c.ReviveMessage(t.Context(), id) })
			require.Contains(t, d.Logs(), revive, "audited")

			code, body = apitest.Refused(apitest.Client(d).ReviveMessage(t.Context(), id))(t)
			require.Equal(t, 409, code, "%s", body)
			require.Contains(t, string(body), "SYS_DLQ_CONFLICT")
			require.Contains(t, string(body), "status=PENDING")
			code, body = apitest.Refused(apitest.Client(d).ReviveMessage(t.Context(), "00000000-0000-4000-8000-000000000000"))(t)
			require.Equal(t, 404, code, "%s", body)
			require.Contains(t, string(body), "SYS_DLQ_NOT_FOUND")
			code, _ = apitest.Refused(apitest.Client(d).ReviveMessage(t.Context(), "not-a-uuid"))(t)
			require.Equal(t, 400, code)

			// The CLI: retry kills it again, revive brings it back.
			_, _, exit := d.CLI("dlq", "retry", id)
			require.Equal(t, 2, exit)
			out, errOut, exit := d.CLI("dlq", "revive", id)
			require.Equal(t, 0, exit, "%s%s", out, errOut)
			require.Contains(t, out, "PENDING")
			require.Equal(t, "PENDING", getMessage(t, d, id).Status)
		})
	}
}

// After the consumer group changed, archived positions were read again and
// stored as new PENDING rows (some republished again), and every archive
// pass after that failed on the archive's unique position.
func TestArchivedPositionsAreNotNewDeadLettersAfterTheGroupChanged(t *testing.T) {
	t.Parallel()
	for _, state := range []string{"sqlite", "postgres"} {
		t.Run(state, func(t *testing.T) {
			k := testsvc.Kafka(t, 1)
			k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1")
			for i := 0; i < 5; i++ {
				k.Kcat(t, fmt.Sprintf(`{"n":%d}`, i)+"\n", "-P", "-t", "orders.dlq.v1", "-H", "error=e")
			}
			extra := sourceBlock(k.Addr, "group-a") + retryBlock(false, "1m") + `
[archive]
interval = "1h"
retention = "1s"
archive_retention = "8760h"
`
			d := startDLQDaemon(t, state, extra)
			waitTotal(t, d, "orders.dlq.v1", 5, time.Minute)
			var all map[string]any
			apitest.Expect(t, d, 200, &all).RetryAll(t.Context(), "orders.dlq.v1", false)
			require.Equal(t, 5.0, all["retried"])
			time.Sleep(1100 * time.Millisecond)
			var run map[string]any
			apitest.Expect(t, d, 200, &run).RunArchive(t.Context(), false)
			require.Equal(t, 5.0, run["archived"], "%v", run)
			waitTotal(t, d, "orders.dlq.v1", 0, time.Minute)

			d.Kill9()
			setGroup(t, d, "group-a", "group-b")
			d.Restarted(t)
			k.Kcat(t, `{"n":5}`+"\n", "-P", "-t", "orders.dlq.v1", "-H", "error=new")
			// Offset 5 is stored after the group re-read offsets 0-4.
			testsvc.Eventually(t, time.Minute, func() bool {
				return list(t, d, "orders.dlq.v1", "").Pagination.TotalCount > 0
			}, "offset 5 stored")
			time.Sleep(2 * time.Second)
			got := list(t, d, "orders.dlq.v1", "")
			require.Equal(t, 1, got.Pagination.TotalCount, "archived positions are known")
			require.Equal(t, "new", got.Messages[0].ErrorMessage)

			apitest.Expect(t, d, 200, &run).RunArchive(t.Context(), false)
			require.Len(t, consumeKcat(t, k, "orders.events.v1"), 5, "nothing republished twice")
		})
	}
}

// Spring's non-blocking retries, key-deserialisation failures and Kafka
// Connect's appended headers became the fallback topic and "unknown error".
func TestHeaderConventionsOfSpringAndKafkaConnect(t *testing.T) {
	t.Parallel()
	k := testsvc.Kafka(t, 1)
	k.CreateTopics(t, 1, "mixed.dlq.v1", "mixed.events.v1")
	cases := []struct {
		headers               []string
		wantOriginal, wantErr string
	}{
		{[]string{"kafka_original-topic=orders.retry-source.v1", "kafka_exception-message=Listener failed",
			"kafka_exception-fqcn=org.springframework.kafka.listener.ListenerExecutionFailedException"}, "orders.retry-source.v1", "Listener failed"},
		{[]string{"kafka_dlt-key-exception-message=Can't deserialize key", "kafka_dlt-key-exception-fqcn=org.x.KeyError"}, "mixed.events.v1", "Can't deserialize key"},
		{[]string{"kafka_key-exception-message=bad key bytes"}, "mixed.events.v1", "bad key bytes"},
		{[]string{"__connect.errors.topic=payments.events.v1", "__connect.errors.exception.message=first failure",
			"__connect.errors.exception.class.name=org.a.First", "__connect.errors.topic=payments.events.v1",
			"__connect.errors.exception.message=second failure", "__connect.errors.exception.class.name=org.a.Second"}, "payments.events.v1", "second failure"},
		{[]string{"__connect.errors.topic=x.events.v1", "__connect.errors.exception.class.name=org.apache.kafka.connect.errors.DataException"},
			"x.events.v1", "org.apache.kafka.connect.errors.DataException"},
		{[]string{"kafka_dlt-exception-fqcn=java.lang.IllegalStateException", "kafka_dlt-exception-message="}, "mixed.events.v1", "java.lang.IllegalStateException"},
		{[]string{"__connect.errors.exception.message=old", "__connect.errors.exception.class.name=org.Old",
			"__connect.errors.exception.message=", "__connect.errors.exception.class.name=org.New"}, "mixed.events.v1", "org.New"},
	}
	for _, c := range cases {
		args := []string{"-P", "-t", "mixed.dlq.v1"}
		for _, h := range c.headers {
			args = append(args, "-H", h)
		}
		k.Kcat(t, "{}\n", args...)
	}
	// The cases name origins of every namespace: this DLQ topic may return
	// messages anywhere (the default, its own namespace, is tested in
	// TestADeadLetterCannotChooseWhereItIsRepublished).
	anywhere := "\n[[dlq.topic]]\nmatch = \"mixed.dlq.v1\"\nreplay_targets = [\"*\"]\n"
	d := startDLQDaemon(t, "sqlite", kafkaSource(k.Addr)+retryBlock(false, "1m")+anywhere)
	waitTotal(t, d, "mixed.dlq.v1", len(cases), time.Minute)
	msgs := byOffset(allMessages(t, d, "mixed.dlq.v1"))
	for i, c := range cases {
		m := msgs[int64(i)]
		require.Equal(t, c.wantOriginal, m.OriginalTopic, "case %d: %s", i, strings.Join(c.headers, " "))
		require.Equal(t, c.wantErr, m.ErrorMessage, "case %d: %s", i, strings.Join(c.headers, " "))
	}
}
