package e2e

import (
	"encoding/json"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// Regression tests for breaks of the dead-letter invariant (docs/design.md):
// every message a consumer put on a DLQ topic is stored exactly once, keeps
// its bytes, and is kept until it is safely replayed or an operator decides
// otherwise; nothing gets stuck.

// totalOf is the total_count of a topic's listing.
func totalOf(t *testing.T, d *testsvc.Daemon, topic string) int {
	t.Helper()
	return list(t, d, topic, "").Pagination.TotalCount
}

// outcomesOf lists the outcomes of a message's attempts history, oldest first.
func outcomesOf(m messageJSON) []string {
	out := []string{}
	for _, a := range m.Attempts {
		out = append(out, a.Outcome)
	}
	return out
}

// A DLQ topic deleted and created again (an operator resets it, changes its
// partitions) starts its offsets at 0 again, so its dead letters have the
// positions (source, topic, partition, offset) of the old topic's stored
// ones. They were taken for redeliveries and never stored; and while the
// daemon ran, its reader stayed at the old topic's offset (Offset Out Of
// Range) and would have skipped the new topic's first messages. A
// redelivery is the same position with the same content: these are new.
func TestDLQRecreatedTopicKeepsItsNewDeadLetters(t *testing.T) {
	t.Parallel()
	k := testsvc.Kafka(t, 1)
	k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1")
	d := startDLQDaemon(t, "sqlite", kafkaSource(k.Addr)+retryBlock(false, "1m"))

	for i := 0; i < 3; i++ {
		produceSync(t, k, &kgo.Record{Topic: "orders.dlq.v1", Value: []byte(`{"old":` + string(rune('0'+i)) + `}`),
			Headers: []kgo.RecordHeader{{Key: "error", Value: []byte("old failure")}}})
	}
	waitTotal(t, d, "orders.dlq.v1", 3, time.Minute)
	old := map[string]messageJSON{}
	for _, m := range allMessages(t, d, "orders.dlq.v1") {
		old[m.ID] = getMessage(t, d, m.ID)
	}

	adm := kadm.NewClient(k.Client(t))
	_, err := adm.DeleteTopics(testsvc.Context(t, 30*time.Second), "orders.dlq.v1")
	require.NoError(t, err)
	time.Sleep(3 * time.Second) // the source notices (refresh_interval = 1s)
	k.CreateTopics(t, 1, "orders.dlq.v1")
	for i := 0; i < 2; i++ {
		produceSync(t, k, &kgo.Record{Topic: "orders.dlq.v1", Value: []byte(`{"new":` + string(rune('0'+i)) + `}`),
			Headers: []kgo.RecordHeader{{Key: "error", Value: []byte("new failure")}}})
	}
	// While running: both new dead letters are stored (the reader left the
	// old topic's offset behind).
	waitTotal(t, d, "orders.dlq.v1", 5, time.Minute)

	// After a restart the new topic is read from its start again: nothing
	// is stored twice.
	d.Signal(syscall.SIGTERM)
	d.Wait(30 * time.Second)
	d.Restarted(t)
	// A marker after the re-read, to know it is done.
	produceSync(t, k, &kgo.Record{Topic: "orders.dlq.v1", Value: []byte(`{"marker":1}`),
		Headers: []kgo.RecordHeader{{Key: "error", Value: []byte("marker")}}})
	waitTotal(t, d, "orders.dlq.v1", 6, time.Minute)
	time.Sleep(time.Second)
	msgs := allMessages(t, d, "orders.dlq.v1")
	require.Len(t, msgs, 6)
	news := map[string]int{}
	for _, m := range msgs {
		if m.ErrorMessage == "new failure" {
			news[string(m.Payload)]++
		}
	}
	require.Equal(t, map[string]int{`{"new":0}`: 1, `{"new":1}`: 1}, news, "each dead letter of the recreated topic is stored once")
	for id, before := range old {
		require.Equal(t, before, getMessage(t, d, id), "the old topic's dead letters did not change")
	}
}

// PostgreSQL's jsonb refuses a number out of numeric's range, which Go's
// json.Valid accepts. The batch failed, the one-by-one fallback's degraded
// copy kept the same payload and failed too, and the source's intake never
// moved again. Now the payload is stored with its bytes and no jsonb copy.
func TestDLQJSONNumberOutOfPostgresRangeDoesNotStallIntake(t *testing.T) {
	t.Parallel()
	k := testsvc.Kafka(t, 1)
	k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1", "billing.dlq.v1")
	state := testsvc.PGDatabase(t)
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{State: state, Extra: kafkaSource(k.Addr) + retryBlock(false, "1m")})

	const huge = `{"amount":1e1000000}`
	k.Kcat(t, huge+"\n", "-P", "-t", "orders.dlq.v1", "-H", "error=overflow")
	k.Kcat(t, `{"order":2}`+"\n", "-P", "-t", "orders.dlq.v1", "-H", "error=an ordinary one")
	k.Kcat(t, `{"invoice":1}`+"\n", "-P", "-t", "billing.dlq.v1", "-H", "error=unrelated")
	waitTotal(t, d, "orders.dlq.v1", 2, time.Minute)
	waitTotal(t, d, "billing.dlq.v1", 1, time.Minute)

	byOff := byOffset(allMessages(t, d, "orders.dlq.v1"))
	m := getMessage(t, d, byOff[0].ID)
	require.Equal(t, huge, string(m.Payload), "the payload's exact bytes")
	require.Equal(t, "overflow", m.ErrorMessage)
	require.Equal(t, "orders.events.v1", m.OriginalTopic, "only the jsonb copy was dropped, not what the headers say")
	require.Equal(t, "an ordinary one", getMessage(t, d, byOff[1].ID).ErrorMessage)

	pool, err := pgxpool.New(testsvc.Context(t, 30*time.Second), state)
	require.NoError(t, err)
	defer pool.Close()
	var hasJSON bool
	require.NoError(t, pool.QueryRow(testsvc.Context(t, 30*time.Second),
		`SELECT payload IS NOT NULL FROM dlq.dlq_messages WHERE id = $1`, m.ID).Scan(&hasJSON))
	require.False(t, hasJSON, "no jsonb copy of a payload jsonb refuses")
}

// A dead letter with an x-dlq-id copied from a replayed message (a consumer
// of the replay fans out, a framework propagates headers) but other bytes,
// on the same DLQ topic, was swallowed: it only counted an attempt against
// the replayed record, and its bytes were gone. A return must carry the
// bytes that were republished.
func TestDLQCopiedIDWithOtherBytesOnTheSameTopicIsANewDeadLetter(t *testing.T) {
	t.Parallel()
	k := testsvc.Kafka(t, 1)
	k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1")
	d := startDLQDaemon(t, "sqlite", kafkaSource(k.Addr)+retryBlock(false, "1m"))

	k.Kcat(t, `{"batch":[1,2,3]}`+"\n", "-P", "-t", "orders.dlq.v1", "-H", "error=batch failed")
	a := waitTotal(t, d, "orders.dlq.v1", 1, time.Minute).Messages[0]
	var retried map[string]any
	apitest.Expect(t, d, 200, &retried).RetryMessage(t.Context(), a.ID)
	require.Equal(t, "RESOLVED", retried["status"])
	before := getMessage(t, d, a.ID)

	// The replay's consumer splits the batch; items 2 and 3 fail and each is
	// dead-lettered with the input record's headers (x-dlq-id included).
	k.Kcat(t, `{"item":2}`+"\n", "-P", "-t", "orders.dlq.v1", "-H", "x-dlq-id="+a.ID, "-H", "error=item 2 failed")
	k.Kcat(t, `{"item":3}`+"\n", "-P", "-t", "orders.dlq.v1", "-H", "x-dlq-id="+a.ID, "-H", "error=item 3 failed")

	waitTotal(t, d, "orders.dlq.v1", 3, time.Minute)
	errs := map[string]string{}
	for _, m := range allMessages(t, d, "orders.dlq.v1") {
		errs[string(m.Payload)] = m.ErrorMessage
	}
	require.Equal(t, map[string]string{`{"batch":[1,2,3]}`: "batch failed", `{"item":2}`: "item 2 failed", `{"item":3}`: "item 3 failed"}, errs)
	require.Equal(t, before, getMessage(t, d, a.ID), "the replayed record did not change")
}

// A returned replay updates its record instead of being stored. When the
// source reads the DLQ topic again (consumer group changed, offsets reset,
// kill -9 between store and commit), every return was applied a second
// time: attempts counted that never happened, a record could go DEAD.
// Every return's position is recorded, so a re-read is recognised.
func TestDLQReReadReturnsAreNotCountedAgain(t *testing.T) {
	t.Parallel()
	for _, state := range []string{"sqlite", "postgres"} {
		t.Run(state, func(t *testing.T) {
			k := testsvc.Kafka(t, 1)
			k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1")
			d := startDLQDaemon(t, state, sourceBlock(k.Addr, "group-a")+retryBlock(false, "1m"))

			k.Kcat(t, `{"order":1}`+"\n", "-P", "-t", "orders.dlq.v1", "-H", "error=first failure")
			a := waitTotal(t, d, "orders.dlq.v1", 1, time.Minute).Messages[0]
			// Replay, the consumer fails again, the replay comes back: twice.
			for i := 1; i <= 2; i++ {
				var retried map[string]any
				apitest.Expect(t, d, 200, &retried).RetryMessage(t.Context(), a.ID)
				require.Equal(t, "RESOLVED", retried["status"])
				k.Kcat(t, `{"order":1}`+"\n", "-P", "-t", "orders.dlq.v1", "-H", "error=first failure",
					"-H", "x-dlq-id="+a.ID, "-H", "x-dlq-retry-count="+string(rune('0'+i)), "-H", "error=replay failed")
				testsvc.Eventually(t, time.Minute, func() bool { return getMessage(t, d, a.ID).RetryCount == i }, "return %d applied", i)
			}
			before := getMessage(t, d, a.ID)
			require.Equal(t, "PENDING", before.Status)
			require.Equal(t, 2, before.RetryCount)

			d.Signal(syscall.SIGTERM)
			d.Wait(30 * time.Second)
			setGroup(t, d, "group-a", "group-b")
			d.Restarted(t)
			// A new dead letter after the re-read, to know the re-read is done.
			k.Kcat(t, `{"order":2}`+"\n", "-P", "-t", "orders.dlq.v1", "-H", "error=new")
			waitTotal(t, d, "orders.dlq.v1", 2, time.Minute)
			time.Sleep(time.Second)
			after := getMessage(t, d, a.ID)
			require.Equal(t, before, after, "re-reading the DLQ topic changes nothing (attempts %v)", outcomesOf(after))
			require.Equal(t, 2, totalOf(t, d, "orders.dlq.v1"))
		})
	}
}

// A replay that comes back while the record's next republish is in flight
// took the record out of RETRYING and cleared its lease; the broker then
// acknowledged the in-flight republish, the outcome no longer applied, and
// the retry answered 200 RESOLVED while the record stayed PENDING. Now the
// return is counted under the lease, and the acknowledgement is recorded.
// A return counts once per attempt (issue 27): a second consumer group's
// failure of replay 1 is not another failed attempt; a failure of the
// replay in flight (x-dlq-retry-count 2: a consumer read it before the
// daemon recorded the broker's acknowledgement) is.
func TestDLQReturnDuringARetryKeepsTheLeaseAndTheAcknowledgement(t *testing.T) {
	t.Parallel()
	k := testsvc.Kafka(t, 1)
	k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1")
	d := startDLQDaemon(t, "sqlite", kafkaSource(k.Addr)+`
[retry]
enabled = false
max_retries = 5
initial_delay = "1m"
max_delay = "2h"
poll_interval = "200ms"
lease = "30s"
`)
	k.Kcat(t, `{"order":1}`+"\n", "-P", "-t", "orders.dlq.v1", "-H", "error=first")
	a := waitTotal(t, d, "orders.dlq.v1", 1, time.Minute).Messages[0]
	var retried map[string]any
	apitest.Expect(t, d, 200, &retried).RetryMessage(t.Context(), a.ID)
	// Replay 1 fails in consumer group X and comes back.
	k.Kcat(t, `{"order":1}`+"\n", "-P", "-t", "orders.dlq.v1", "-H", "x-dlq-id="+a.ID, "-H", "x-dlq-retry-count=1", "-H", "error=group X failed")
	testsvc.Eventually(t, time.Minute, func() bool { return getMessage(t, d, a.ID).RetryCount == 1 }, "return applied")

	// The broker takes 8 s to acknowledge the next republish: time for a
	// return to be taken in meanwhile, even on a loaded machine.
	c := k.Cluster()
	events, err := kadm.NewClient(k.Client(t)).ListTopics(testsvc.Context(t, time.Minute), "orders.events.v1")
	require.NoError(t, err)
	eventsID := events["orders.events.v1"].ID
	var slow atomic.Bool
	slow.Store(true)
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		for _, tp := range req.(*kmsg.ProduceRequest).Topics {
			// Produce v13+ names topics by id only.
			if (tp.Topic == "orders.events.v1" || tp.TopicID == eventsID) && slow.CompareAndSwap(true, false) {
				c.SleepControl(func() { time.Sleep(8 * time.Second) })
			}
		}
		return nil, nil, false
	})
	done := make(chan apitest.Answer, 1)
	go func() {
		var ans apitest.Answer
		apitest.Record(d, &ans).RetryMessage(t.Context(), a.ID)
		done <- ans
	}()
	testsvc.Eventually(t, 3*time.Second, func() bool { return getMessage(t, d, a.ID).Status == "RETRYING" }, "retry in flight")
	// Meanwhile consumer group Y's failure on replay 1 arrives: the same
	// failed attempt, not counted again; then a failure of replay 2.
	k.Kcat(t, `{"order":1}`+"\n", "-P", "-t", "orders.dlq.v1", "-H", "x-dlq-id="+a.ID, "-H", "x-dlq-retry-count=1", "-H", "error=group Y failed")
	k.Kcat(t, `{"order":1}`+"\n", "-P", "-t", "orders.dlq.v1", "-H", "x-dlq-id="+a.ID, "-H", "x-dlq-retry-count=2", "-H", "error=group X failed again")
	testsvc.Eventually(t, 6*time.Second, func() bool { return getMessage(t, d, a.ID).RetryCount == 2 }, "the return is counted during the retry")
	mid := getMessage(t, d, a.ID)
	require.Equal(t, "RETRYING", mid.Status, "the return does not take the record out of its retry")

	var ans apitest.Answer
	select {
	case ans = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the retry did not answer")
	}
	m := getMessage(t, d, a.ID)
	t.Logf("retry answered %d %s; stored: status=%s retry_count=%d attempts=%v", ans.Code, ans.Body, m.Status, m.RetryCount, outcomesOf(m))
	require.Equal(t, 200, ans.Code, "%s", ans.Body)
	var body map[string]any
	require.NoError(t, json.Unmarshal(ans.Body, &body))
	require.Equal(t, m.Status, body["status"], "the answer is the stored status")
	require.Equal(t, "RESOLVED", m.Status, "the broker's acknowledgement is recorded")
	require.Equal(t, 2, m.RetryCount, "one return of each attempt counted")
	require.Equal(t, []string{"resolved", "returned", "returned", "resolved"}, outcomesOf(m))
	require.Len(t, consumeKcat(t, k, "orders.events.v1"), 2, "two republishes")
}

// A dead letter whose original topic cannot be told (a Kafka Connect DLQ
// without context headers, whose name has no configured suffix) fell back
// to the DLQ topic itself: a retry "republished" it into its own DLQ, and
// the copy read back counted as the replay having failed again. Such a
// message has no known original topic: it is kept, listed and deletable,
// never republished automatically, and a manual retry is a clear 409.
func TestDLQWithoutAnOriginalTopicIsNeverRepublishedIntoItsDLQ(t *testing.T) {
	t.Parallel()
	k := testsvc.Kafka(t, 1)
	k.CreateTopics(t, 1, "sink-dlq")
	src := strings.Replace(kafkaSource(k.Addr), `group_id = "lifecycled-e2e"`, `group_id = "lifecycled-e2e"`+"\ntopic_pattern = \"*-dlq\"", 1)
	d := startDLQDaemon(t, "sqlite", src+`
[retry]
enabled = true
max_retries = 3
initial_delay = "100ms"
max_delay = "200ms"
poll_interval = "100ms"
lease = "2s"
`)
	k.Kcat(t, `{"row":1}`+"\n", "-P", "-t", "sink-dlq")
	// A header naming the DLQ topic itself is no original topic either.
	k.Kcat(t, `{"row":2}`+"\n", "-P", "-t", "sink-dlq", "-H", "original_topic=sink-dlq")
	waitTotal(t, d, "sink-dlq", 2, time.Minute)
	time.Sleep(2 * time.Second) // automatic retries would have run many times
	for _, l := range allMessages(t, d, "sink-dlq") {
		m := getMessage(t, d, l.ID)
		require.Equal(t, "", m.OriginalTopic, "offset %d", offsetOf(m.PositionID))
		require.Equal(t, "PENDING", m.Status)
		require.Zero(t, m.RetryCount)
		require.Empty(t, m.Attempts, "never retried automatically")
		require.NotNil(t, m.LastError, "the reason is kept")
		require.Contains(t, *m.LastError, "no original topic")

		code, body := apitest.Refused(apitest.Client(d).RetryMessage(t.Context(), m.ID))(t)
		require.Equal(t, 409, code, "%s", body)
		env := decodeEnvelope(t, body)
		require.Equal(t, "SYS_DLQ_CONFLICT", env.Error.Code)
		require.Contains(t, env.Error.Message, "no original topic")
		require.Equal(t, m, getMessage(t, d, m.ID), "a refused retry changes nothing")
	}
	var dry map[string]any
	apitest.Expect(t, d, 200, &dry).RetryAll(t.Context(), "sink-dlq", true)
	require.Equal(t, 0.0, dry["retryable"], "retry-all would not take them")
	require.Len(t, consumeKcat(t, k, "sink-dlq"), 2, "nothing was written to the DLQ topic")

	id := allMessages(t, d, "sink-dlq")[0].ID
	apitest.Expect(t, d, 200, nil).DeleteMessage(t.Context(), id)
	require.Equal(t, 1, totalOf(t, d, "sink-dlq"))
}

// The source a message was taken in by is renamed in the config (or
// removed). Every automatic retry found no source, counted nothing and put
// the message back: it was retried forever, and 50 "unavailable" entries
// pushed its real history out. The retry loop now leaves such messages
// alone and the API says why.
func TestDLQMessagesOfARemovedSourceAreNotRetriedForever(t *testing.T) {
	t.Parallel()
	k := testsvc.Kafka(t, 1)
	k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1")
	d := startDLQDaemon(t, "sqlite", kafkaSource(k.Addr)+`
[retry]
enabled = true
max_retries = 50
initial_delay = "100ms"
max_delay = "200ms"
poll_interval = "100ms"
lease = "2s"
`)
	k.Kcat(t, `{"order":1}`+"\n", "-P", "-t", "orders.dlq.v1", "-H", "error=e", "-H", "original_topic=orders.no such topic!")
	id := waitTotal(t, d, "orders.dlq.v1", 1, time.Minute).Messages[0].ID
	// The invalid original topic fails permanently, counted: a real attempt.
	testsvc.Eventually(t, 30*time.Second, func() bool { return getMessage(t, d, id).RetryCount >= 1 }, "first real attempt")
	d.Signal(syscall.SIGTERM)
	d.Wait(30 * time.Second)

	b, err := os.ReadFile(d.ConfigPath)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(d.ConfigPath, []byte(strings.Replace(string(b), `name = "kafka"`, `name = "kafka-prod"`, 1)), 0o600))
	d.Restarted(t)
	first := getMessage(t, d, id)
	require.Equal(t, "PENDING", first.Status)
	time.Sleep(3 * time.Second) // some 30 passes of the retry loop
	m := getMessage(t, d, id)
	t.Logf("after the rename: status=%s retry_count=%d/%d attempts=%v", m.Status, m.RetryCount, m.MaxRetries, outcomesOf(m))
	require.Equal(t, first, m, "the retry loop leaves it alone")
	require.NotContains(t, outcomesOf(m), "unavailable")
	require.Equal(t, "failed", m.Attempts[0].Outcome, "its real history is whole")
	var raw map[string]any
	apitest.Expect(t, d, 200, &raw).Message(t.Context(), id)
	require.Equal(t, false, raw["source_configured"])

	var topics struct {
		Topics []struct {
			Topic               string           `json:"topic"`
			UnconfiguredSources map[string]int64 `json:"unconfigured_sources"`
		} `json:"topics"`
	}
	apitest.Expect(t, d, 200, &topics).Topics(t.Context())
	require.Len(t, topics.Topics, 1)
	require.Equal(t, map[string]int64{"kafka": 1}, topics.Topics[0].UnconfiguredSources)
	out, _, code := d.CLI("dlq", "topics")
	require.Zero(t, code)
	require.Contains(t, out, `source "kafka" is not configured`)
	require.Contains(t, metrics(t, d), `lifecycled_dlq_unconfigured_source_messages{source="kafka"} 1`)

	// A manual retry says why, changes nothing and leaves no history entry.
	code, body := apitest.Refused(apitest.Client(d).RetryMessage(t.Context(), id))(t)
	require.Equal(t, 503, code, "%s", body)
	require.Contains(t, string(body), `source \"kafka\" is not configured`)
	require.Equal(t, m, getMessage(t, d, id))
}
