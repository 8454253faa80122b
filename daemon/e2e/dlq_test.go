package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// kafkaSource is a [[dlq_source]] block for a test broker.
func kafkaSource(addr string) string {
	return fmt.Sprintf(`
[[dlq_source]]
name = "kafka"
plugin = "kafka"
[dlq_source.config]
brokers = [%q]
group_id = "lifecycled-e2e"
refresh_interval = "1s"
session_timeout = "2s"
`, addr)
}

func retryBlock(enabled bool, initial string) string {
	return fmt.Sprintf(`
[retry]
enabled = %v
max_retries = 3
initial_delay = %q
max_delay = "2h"
poll_interval = "200ms"
lease = "2s"
`, enabled, initial)
}

type listBody struct {
	Messages []struct {
		ID            string          `json:"id"`
		Topic         string          `json:"topic"`
		OriginalTopic string          `json:"original_topic"`
		ErrorMessage  string          `json:"error_message"`
		RetryCount    int             `json:"retry_count"`
		MaxRetries    int             `json:"max_retries"`
		Status        string          `json:"status"`
		Payload       json.RawMessage `json:"payload"`
		PayloadBase64 *string         `json:"payload_base64"`
		Key           *string         `json:"key"`
	} `json:"messages"`
	Pagination struct {
		TotalCount int  `json:"total_count"`
		HasNext    bool `json:"has_next"`
	} `json:"pagination"`
}

func list(t *testing.T, d *testsvc.Daemon, topic string, query string) listBody {
	t.Helper()
	var b listBody
	if !strings.Contains(query, "page_size") {
		query += "&page_size=1000"
	}
	q, err := url.ParseQuery(strings.TrimPrefix(query, "&"))
	require.NoError(t, err)
	apitest.Expect(t, d, 200, &b).ListMessages(t.Context(), topic, q)
	return b
}

func waitTotal(t *testing.T, d *testsvc.Daemon, topic string, want int, within time.Duration) listBody {
	t.Helper()
	var b listBody
	deadline := time.Now().Add(within)
	for {
		b = list(t, d, topic, "")
		if b.Pagination.TotalCount == want {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %d messages after %s, want %d", topic, b.Pagination.TotalCount, within, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kcatMessage is a message as kcat -J prints it.
type kcatMessage struct {
	Topic   string   `json:"topic"`
	Key     *string  `json:"key"`
	Payload *string  `json:"payload"`
	Headers []string `json:"headers"`
}

func consumeKcat(t *testing.T, k *testsvc.KafkaBroker, topic string) []kcatMessage {
	out := k.Kcat(t, "", "-C", "-t", topic, "-o", "beginning", "-e", "-J", "-q")
	var msgs []kcatMessage
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var m kcatMessage
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		msgs = append(msgs, m)
	}
	return msgs
}

func header(m kcatMessage, key string) (string, bool) {
	for i := 0; i+1 < len(m.Headers); i += 2 {
		if m.Headers[i] == key {
			return m.Headers[i+1], true
		}
	}
	return "", false
}

func TestDLQEndToEndWithKcat(t *testing.T) {
	t.Parallel()
	for _, state := range []string{"sqlite", "postgres"} {
		t.Run(state, func(t *testing.T) {
			k := testsvc.Kafka(t, 1)
			k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1", "payments.dlq.v1", "payments.events.v1")
			o := testsvc.DaemonOptions{Extra: kafkaSource(k.Addr) + retryBlock(false, "1m")}
			if state == "postgres" {
				o.State = testsvc.PGDatabase(t)
			}
			d := testsvc.StartDaemon(t, o)
			testsvc.Eventually(t, 30*time.Second, apitest.Ready(d), "ready")

			// Spring-style dead letter with a JSON payload and a key.
			k.Kcat(t, `{"order_id":"123"}`+"\n", "-P", "-t", "orders.dlq.v1", "-k", "order-123",
				"-H", "kafka_dlt-original-topic=orders.events.v1", "-H", "kafka_dlt-exception-message=NullPointerException in OrderHandler",
				"-H", "trace-id=abc")
			// Connect-style dead letter with a payload that is not JSON.
			k.Kcat(t, "plain text, not json\n", "-P", "-t", "payments.dlq.v1",
				"-H", "__connect.errors.topic=payments.events.v1", "-H", "__connect.errors.exception.message=Converter failure")

			orders := waitTotal(t, d, "orders.dlq.v1", 1, time.Minute)
			m := orders.Messages[0]
			require.Equal(t, "orders.events.v1", m.OriginalTopic)
			require.Equal(t, "NullPointerException in OrderHandler", m.ErrorMessage)
			require.Equal(t, "PENDING", m.Status)
			require.JSONEq(t, `{"order_id":"123"}`, string(m.Payload))
			require.Nil(t, m.PayloadBase64)
			require.Equal(t, "order-123", *m.Key)
			byOriginal := list(t, d, "orders.events.v1", "")
			require.Equal(t, 1, byOriginal.Pagination.TotalCount, "the original topic finds it too")

			pay := waitTotal(t, d, "payments.dlq.v1", 1, time.Minute).Messages[0]
			require.Equal(t, "payments.events.v1", pay.OriginalTopic)
			require.Equal(t, "Converter failure", pay.ErrorMessage)
			require.Equal(t, "null", string(pay.Payload))
			require.NotNil(t, pay.PayloadBase64)
			require.Equal(t, "cGxhaW4gdGV4dCwgbm90IGpzb24=", *pay.PayloadBase64, "kept byte for byte")

			var one map[string]any
			apitest.Expect(t, d, 200, &one).Message(t.Context(), m.ID)
			require.Equal(t, m.ID, one["id"])

			// Retry: the broker has it on the original topic with key and headers.
			var retried map[string]any
			apitest.Expect(t, d, 200, &retried).RetryMessage(t.Context(), m.ID)
			require.Equal(t, map[string]any{"id": m.ID, "status": "RESOLVED", "message": "message retry initiated"}, retried)
			events := consumeKcat(t, k, "orders.events.v1")
			require.Len(t, events, 1)
			require.Equal(t, "order-123", *events[0].Key)
			require.JSONEq(t, `{"order_id":"123"}`, *events[0].Payload)
			id, ok := header(events[0], "x-dlq-id")
			require.True(t, ok)
			require.Equal(t, m.ID, id)
			rc, _ := header(events[0], "x-dlq-retry-count")
			require.Equal(t, "1", rc)
			trace, _ := header(events[0], "trace-id")
			require.Equal(t, "abc", trace, "original headers kept")

			// Retrying a RESOLVED message is a conflict in the seed's words.
			code, body := apitest.Refused(apitest.Client(d).RetryMessage(t.Context(), m.ID))(t)
			require.Equal(t, 409, code)
			require.Contains(t, string(body), "message is not retryable: status=RESOLVED, retry_count=0/3")

			// The consumer fails again and the message comes back with its
			// x-dlq-id: the same record is updated, not a new one created.
			k.Kcat(t, `{"order_id":"123"}`+"\n", "-P", "-t", "orders.dlq.v1", "-k", "order-123",
				"-H", "x-dlq-id="+m.ID, "-H", "error=still failing", "-H", "kafka_dlt-original-topic=orders.events.v1")
			testsvc.Eventually(t, time.Minute, func() bool {
				var got map[string]any
				apitest.Expect(t, d, 200, &got).Message(t.Context(), m.ID)
				return got["status"] == "PENDING" && got["retry_count"] == 1.0 && got["error_message"] == "still failing"
			}, "record updated by the returning replay")
			require.Equal(t, 1, list(t, d, "orders.dlq.v1", "").Pagination.TotalCount, "no new record")

			// Retry-all counts what it republished.
			for i := 0; i < 5; i++ {
				k.Kcat(t, fmt.Sprintf(`{"n":%d}`, i)+"\n", "-P", "-t", "orders.dlq.v1", "-H", "error=e")
			}
			waitTotal(t, d, "orders.dlq.v1", 6, time.Minute)
			out, _, exit := d.CLI("dlq", "retry-all", "orders.dlq.v1", "--dry-run")
			require.Equal(t, 0, exit)
			require.Equal(t, "6 messages would be retried in topic orders.dlq.v1\n", out)
			require.Equal(t, 6, list(t, d, "orders.dlq.v1", "&status=PENDING").Pagination.TotalCount, "the dry run changed nothing")
			require.Empty(t, consumeKcat(t, k, "orders.events.v1")[1:], "and republished nothing")
			var all map[string]any
			apitest.Expect(t, d, 200, &all).RetryAll(t.Context(), "orders.dlq.v1", false)
			require.Equal(t, 6.0, all["retried"])
			require.Equal(t, "6 messages retried in topic orders.dlq.v1", all["message"])
			resolved := list(t, d, "orders.dlq.v1", "&status=RESOLVED")
			require.Equal(t, 6, resolved.Pagination.TotalCount)

			// Topics summary and CLI.
			out, _, exit = d.CLI("dlq", "topics")
			require.Equal(t, 0, exit)
			require.Contains(t, out, "orders.dlq.v1")
			out, _, exit = d.CLI("--format", "json", "dlq", "list", "payments.dlq.v1")
			require.Equal(t, 0, exit)
			require.Contains(t, out, pay.ID)

			// Delete.
			var del map[string]any
			apitest.Expect(t, d, 200, &del).DeleteMessage(t.Context(), pay.ID)
			require.Equal(t, map[string]any{"success": true, "message": "message " + pay.ID + " deleted"}, del)
			code, _ = apitest.Refused(apitest.Client(d).Message(t.Context(), pay.ID))(t)
			require.Equal(t, 404, code)

			text := metrics(t, d)
			require.Contains(t, text, `lifecycled_dlq_messages{status="RESOLVED",topic="orders.dlq.v1"} 6`)
			require.Contains(t, text, `lifecycled_dlq_ingested_total{source="kafka"}`)
		})
	}
}

func produce(t *testing.T, k *testsvc.KafkaBroker, topic string, n int) {
	c := k.Client(t, kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100000))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	for i := 0; i < n; i++ {
		wg.Add(1)
		c.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf(`{"n":%d}`, i)),
			Headers: []kgo.RecordHeader{{Key: "error", Value: []byte("consumer failed")}}}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	require.NoError(t, firstErr)
}

func TestKill9DuringIntakeStoresEveryMessageOnce(t *testing.T) {
	t.Parallel()
	const n = 20000
	k := testsvc.Kafka(t, 3)
	k.CreateTopics(t, 3, "orders.dlq.v1", "orders.events.v1")
	produce(t, k, "orders.dlq.v1", n)
	o := testsvc.DaemonOptions{State: testsvc.PGDatabase(t), Extra: kafkaSource(k.Addr) + retryBlock(false, "1m")}
	d := testsvc.StartDaemon(t, o)
	testsvc.Eventually(t, 2*time.Minute, func() bool {
		b := list(t, d, "orders.dlq.v1", "&page_size=1")
		return b.Pagination.TotalCount > 1000
	}, "intake under way")
	d.Kill9()
	stored := list(t, d.Restarted(t), "orders.dlq.v1", "&page_size=1").Pagination.TotalCount
	t.Logf("killed with %d of %d stored", stored, n)
	require.Less(t, stored, n, "killed in the middle")
	waitTotal(t, d, "orders.dlq.v1", n, 3*time.Minute)
	// And it stays exactly n: nothing arrives twice late.
	time.Sleep(3 * time.Second)
	require.Equal(t, n, list(t, d, "orders.dlq.v1", "&page_size=1").Pagination.TotalCount)
}

func TestKill9DuringRetryAllLosesNothing(t *testing.T) {
	t.Parallel()
	const n = 10000
	k := testsvc.Kafka(t, 1)
	k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1")
	produce(t, k, "orders.dlq.v1", n)
	// Automatic retries on, but far in the future: only retry-all and the
	// lease reaper republish here.
	o := testsvc.DaemonOptions{State: testsvc.PGDatabase(t), Extra: kafkaSource(k.Addr) + retryBlock(true, "1h")}
	d := testsvc.StartDaemon(t, o)
	waitTotal(t, d, "orders.dlq.v1", n, 2*time.Minute)

	done := make(chan struct{})
	go func() {
		defer close(done)
		apitest.Client(d).RetryAll(t.Context(), "orders.dlq.v1", false)
	}()
	testsvc.Eventually(t, time.Minute, func() bool {
		return list(t, d, "orders.dlq.v1", "&status=RESOLVED&page_size=1").Pagination.TotalCount > 100
	}, "retry-all under way")
	d.Kill9()
	<-done
	d.Restarted(t)
	resolved := list(t, d, "orders.dlq.v1", "&status=RESOLVED&page_size=1").Pagination.TotalCount
	retrying := list(t, d, "orders.dlq.v1", "&status=RETRYING&page_size=1").Pagination.TotalCount
	t.Logf("after the kill: %d RESOLVED, %d RETRYING of %d", resolved, retrying, n)
	require.Less(t, resolved, n, "killed in the middle of retry-all")

	// Retry-all is a bulk operation: once its lease ends, the restarted
	// daemon resumes it after its last recorded page (the messages of the
	// page in flight at the kill go back to PENDING and are taken again).
	testsvc.Eventually(t, 2*time.Minute, func() bool {
		var ops struct {
			Operations []struct{ State string } `json:"operations"`
		}
		apitest.Expect(t, d, 200, &ops).Operations(t.Context(), nil)
		return len(ops.Operations) == 1 && ops.Operations[0].State == "COMPLETED"
	}, "the interrupted retry-all resumed and completed")
	require.Equal(t, n, list(t, d, "orders.dlq.v1", "&status=RESOLVED&page_size=1").Pagination.TotalCount, "every message RESOLVED")
	var res map[string]any
	apitest.Expect(t, d, 200, &res).RetryAll(t.Context(), "orders.dlq.v1", false)
	require.EqualValues(t, 0, res["retried"], "nothing left to retry")

	// Every record was acknowledged by the broker at least once.
	ids := map[string]int{}
	for _, m := range consumeKcat(t, k, "orders.events.v1") {
		id, ok := header(m, "x-dlq-id")
		require.True(t, ok)
		ids[id]++
	}
	records, dups := 0, 0
	for _, c := range ids {
		records += c
		if c > 1 {
			dups++
		}
	}
	t.Logf("%d republished records, %d distinct, %d republished more than once (at-least-once)", records, len(ids), dups)
	require.Len(t, ids, n)
}

func TestBrokerDownPausesIntakeAndRetryAnswers503(t *testing.T) {
	t.Parallel()
	k := testsvc.Kafka(t, 1)
	k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1")
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Extra: kafkaSource(k.Addr) + retryBlock(false, "1m")})
	k.Kcat(t, "{}\n", "-P", "-t", "orders.dlq.v1", "-H", "error=x")
	m := waitTotal(t, d, "orders.dlq.v1", 1, time.Minute).Messages[0]

	k.Stop()
	code, body := apitest.Refused(apitest.Client(d).RetryMessage(t.Context(), m.ID))(t)
	require.Equal(t, 503, code, "%s", body)
	require.Contains(t, string(body), "SYS_DLQ_SOURCE_UNAVAILABLE")
	var got map[string]any
	apitest.Expect(t, d, 200, &got).Message(t.Context(), m.ID)
	require.Equal(t, "PENDING", got["status"], "stays PENDING")
	require.Equal(t, 0.0, got["retry_count"], "a broker outage is not the message's failure")
	var health apitest.Answer
	apitest.Record(d, &health).Healthz(t.Context())
	require.Equal(t, 200, health.Code, "liveness never fails because a store is down")

	k.Start()
	k.Kcat(t, "{}\n", "-P", "-t", "orders.dlq.v1", "-H", "error=y")
	waitTotal(t, d, "orders.dlq.v1", 2, 2*time.Minute)
	var retried map[string]any
	apitest.Expect(t, d, 200, &retried).RetryMessage(t.Context(), m.ID)
	require.Equal(t, "RESOLVED", retried["status"])
}

func TestPluginCrashMidRetryIsRestarted(t *testing.T) {
	t.Parallel()
	k := testsvc.Kafka(t, 1)
	k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1")
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Extra: kafkaSource(k.Addr) + retryBlock(false, "1m")})
	k.Kcat(t, "{}\n", "-P", "-t", "orders.dlq.v1", "-H", "error=x")
	m := waitTotal(t, d, "orders.dlq.v1", 1, time.Minute).Messages[0]
	var plugins struct {
		Plugins []struct {
			Name     string `json:"name"`
			PID      int    `json:"pid"`
			Restarts int    `json:"restarts"`
			State    string `json:"state"`
		} `json:"plugins"`
	}
	apitest.Expect(t, d, 200, &plugins).Plugins(t.Context())
	require.NoError(t, syscall.Kill(plugins.Plugins[0].PID, syscall.SIGKILL))
	testsvc.Eventually(t, 30*time.Second, func() bool {
		apitest.Expect(t, d, 200, &plugins).Plugins(t.Context())
		return plugins.Plugins[0].State == "running" && plugins.Plugins[0].Restarts >= 1
	}, "kafka plugin restarted")
	var retried map[string]any
	apitest.Expect(t, d, 200, &retried).RetryMessage(t.Context(), m.ID)
	require.Equal(t, "RESOLVED", retried["status"])
	out, _, code := d.CLI("plugins", "list")
	require.Equal(t, 0, code)
	require.Contains(t, out, "kafka")
}

func TestAutomaticRetryResolvesThroughTheBroker(t *testing.T) {
	t.Parallel()
	k := testsvc.Kafka(t, 1)
	k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1")
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Extra: kafkaSource(k.Addr) + retryBlock(true, "300ms")})
	k.Kcat(t, `{"order_id":"7"}`+"\n", "-P", "-t", "orders.dlq.v1", "-k", "order-7", "-H", "error=timeout")

	var got map[string]any
	testsvc.Eventually(t, time.Minute, func() bool {
		if list(t, d, "orders.dlq.v1", "").Pagination.TotalCount != 1 {
			return false
		}
		got = nil
		apitest.Expect(t, d, 200, &got).Message(t.Context(), list(t, d, "orders.dlq.v1", "").Messages[0].ID)
		return got["status"] == "RESOLVED"
	}, "the retry loop republishes the message without an operator (%v)", got)

	events := consumeKcat(t, k, "orders.events.v1")
	require.Len(t, events, 1)
	require.Equal(t, "order-7", *events[0].Key)
	id, _ := header(events[0], "x-dlq-id")
	require.Equal(t, got["id"], id)
	require.Contains(t, metrics(t, d), `lifecycled_dlq_retries_total{outcome="resolved",source="kafka",trigger="auto"} 1`)
}
