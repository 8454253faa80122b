package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// endOffset is how many records a topic holds.
func endOffset(t *testing.T, k *testsvc.KafkaBroker, topic string) int64 {
	t.Helper()
	return k.Records(t, topic)
}

// Edit-and-replay and the history through the CLI, with a real broker and
// the Kafka plugin: a dry run sends nothing, the replay sends exactly the
// edit (binary key and header kept), the stored messages answer byte for
// byte as before, and `dlq show` has the replay with the caller's uid. A
// pause survives a restart and stops nothing manual.
func TestReplayHistoryAndPauseThroughTheCLI(t *testing.T) {
	t.Parallel()
	for _, state := range []string{"sqlite", "postgres"} {
		t.Run(state, func(t *testing.T) {
			k := testsvc.Kafka(t, 1)
			k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1", "orders.fixed.v1")
			produceSync(t, k,
				&kgo.Record{Topic: "orders.dlq.v1", Key: []byte{0, 0xff, 'k'}, Value: []byte(`{"order":1,"bad":true}`),
					Headers: []kgo.RecordHeader{{Key: "bin\xffkey", Value: []byte{0xfe, 0}}, {Key: "trace", Value: []byte("t1")},
						{Key: "error", Value: []byte("NullPointerException")}}},
				&kgo.Record{Topic: "orders.dlq.v1", Key: []byte("other"), Value: []byte(`{"order":2}`),
					Headers: []kgo.RecordHeader{{Key: "error", Value: []byte("e2")}}})
			d := startDLQDaemon(t, state, kafkaSource(k.Addr)+retryBlock(false, "1m"))
			waitTotal(t, d, "orders.dlq.v1", 2, time.Minute)
			msgs := byOffset(allMessages(t, d, "orders.dlq.v1"))
			id, other := msgs[0].ID, msgs[1].ID
			var before, otherBefore apitest.Answer
			apitest.Record(d, &before).Message(t.Context(), id)
			apitest.Record(d, &otherBefore).Message(t.Context(), other)

			fixed := filepath.Join(t.TempDir(), "fixed.json")
			require.NoError(t, os.WriteFile(fixed, []byte("{\"order\": 1,\n \"bad\": false}\n"), 0o600))
			args := []string{"dlq", "replay", id, "--payload-file", fixed, "--header", "trace=t2", "--topic", "orders.fixed.v1"}
			out, errOut, code := d.CLI(append(args, "--dry-run")...)
			require.Equal(t, 0, code, errOut)
			require.Contains(t, out, "dry run: "+id+" would be replayed to orders.fixed.v1 (changed: payload, headers, topic); nothing was sent")
			out, errOut, code = d.CLI(args...)
			require.Equal(t, 0, code, errOut)
			require.Contains(t, out, id+" replayed to orders.fixed.v1 as ")
			replayID := strings.Fields(strings.SplitN(out, " as ", 2)[1])[0]

			recs := consumeRecords(t, k, "orders.fixed.v1", 1)
			require.Equal(t, int64(1), endOffset(t, k, "orders.fixed.v1"), "the dry run sent nothing")
			require.Equal(t, []byte{0, 0xff, 'k'}, recs[0].Key)
			require.Equal(t, []byte("{\"order\": 1,\n \"bad\": false}\n"), recs[0].Value, "the file's bytes exactly")
			require.Equal(t, []rawHeader{{[]byte("bin\xffkey"), []byte{0xfe, 0}}, {[]byte("error"), []byte("NullPointerException")},
				{[]byte("trace"), []byte("t2")}}, withoutDLQHeaders(recs[0].Headers))
			replayHeaders := map[string]string{}
			for _, h := range recs[0].Headers {
				replayHeaders[h.Key] = string(h.Value)
			}
			require.Equal(t, id, replayHeaders["x-dlq-replay-of"])
			require.Equal(t, replayID, replayHeaders["x-dlq-replay-id"])
			require.NotContains(t, replayHeaders, "x-dlq-id")
			require.Equal(t, int64(0), endOffset(t, k, "orders.events.v1"))

			var after, otherAfter apitest.Answer
			apitest.Record(d, &after).Message(t.Context(), id)
			apitest.Record(d, &otherAfter).Message(t.Context(), other)
			require.Equal(t, string(before.Body), string(after.Body), "the replayed message is unchanged, byte for byte")
			require.Equal(t, string(otherBefore.Body), string(otherAfter.Body))

			out, errOut, code = d.CLI("dlq", "show", id)
			require.Equal(t, 0, code, errOut)
			require.Contains(t, out, "history:")
			require.Contains(t, out, "intake")
			require.Contains(t, out, "replayed")
			require.Contains(t, out, "uid "+strconv.Itoa(os.Getuid()))
			require.Contains(t, out, "replay_id="+replayID)
			out, errOut, code = d.CLI("--format", "json", "dlq", "show", id)
			require.Equal(t, 0, code, errOut)
			var shown struct {
				Message messageJSON `json:"message"`
				History struct {
					Events []struct {
						Kind   string         `json:"kind"`
						Detail map[string]any `json:"detail"`
						UID    *int           `json:"uid"`
					} `json:"events"`
				} `json:"history"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &shown), out)
			require.Equal(t, id, shown.Message.ID)
			require.Len(t, shown.History.Events, 2)
			require.Equal(t, "intake", shown.History.Events[0].Kind)
			require.Equal(t, "orders.dlq.v1", shown.History.Events[0].Detail["topic"])
			require.Equal(t, "replayed", shown.History.Events[1].Kind)
			require.Equal(t, os.Getuid(), *shown.History.Events[1].UID)
			require.Equal(t, "resolved", shown.History.Events[1].Detail["outcome"])

			// Refusals: a usage error is exit 1, the daemon's refusal exit 2.
			_, _, code = d.CLI("dlq", "replay", id, "--header", "=x")
			require.Equal(t, 1, code)
			_, errOut, code = d.CLI("dlq", "replay", id, "--topic", "orders.dlq.v1")
			require.Equal(t, 2, code)
			require.Contains(t, errOut, "SYS_DLQ_VALIDATION_ERROR")

			// Pause, through a restart; a manual retry still works.
			out, errOut, code = d.CLI("dlq", "pause", "orders.dlq.v1", "--reason", "INC-1")
			require.Equal(t, 0, code, errOut)
			require.Contains(t, out, "paused")
			d.Kill9()
			d.Restarted(t)
			out, errOut, code = d.CLI("dlq", "topics")
			require.Equal(t, 0, code, errOut)
			require.Contains(t, out, "orders.dlq.v1: automatic retries PAUSED by uid "+strconv.Itoa(os.Getuid()))
			require.Contains(t, out, "INC-1")
			var retried map[string]any
			apitest.Expect(t, d, 200, &retried).RetryMessage(t.Context(), other)
			require.Equal(t, "RESOLVED", retried["status"])
			_, errOut, code = d.CLI("dlq", "resume", "orders.dlq.v1")
			require.Equal(t, 0, code, errOut)
			_, errOut, code = d.CLI("dlq", "resume", "orders.dlq.v1")
			require.Equal(t, 2, code, "not paused any more")
			require.Contains(t, errOut, "SYS_DLQ_NOT_FOUND")
		})
	}
}

// A consumer that keeps failing: every replay the daemon sends to the
// original topic is dead-lettered again, with its x-dlq-id, as Spring's
// DeadLetterPublishingRecoverer would. After auto_pause_returns returns the
// daemon pauses the topic by itself, says so in `dlq topics` and /metrics,
// and stops republishing it; a resume lets the retries run again.
func TestAutoPauseThroughTheBroker(t *testing.T) {
	t.Parallel()
	k := testsvc.Kafka(t, 1)
	k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1")
	for i := 0; i < 3; i++ {
		produceSync(t, k, &kgo.Record{Topic: "orders.dlq.v1", Key: []byte{byte('a' + i)}, Value: []byte(`{"n":` + strconv.Itoa(i) + `}`),
			Headers: []kgo.RecordHeader{{Key: "error", Value: []byte("boom")}}})
	}
	d := startDLQDaemon(t, "sqlite", kafkaSource(k.Addr)+retryBlock(true, "100ms")+`
[dlq]
auto_pause_returns = 2
auto_pause_window = "10m"
`)
	waitTotal(t, d, "orders.dlq.v1", 3, time.Minute)

	// The failing consumer.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		c := k.Client(t, kgo.ConsumeTopics("orders.events.v1"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		p := k.Client(t)
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			c.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				back := &kgo.Record{Topic: "orders.dlq.v1", Key: r.Key, Value: r.Value,
					Headers: append(append([]kgo.RecordHeader{}, r.Headers...), kgo.RecordHeader{Key: "error", Value: []byte("still boom")})}
				_ = p.ProduceSync(context.Background(), back).FirstErr()
			})
			cancel()
		}
	}()
	defer func() { close(stop); <-done }()

	testsvc.Eventually(t, time.Minute, func() bool {
		out, _, code := d.CLI("dlq", "topics")
		return code == 0 && strings.Contains(out, "orders.dlq.v1: automatic retries PAUSED automatically")
	}, "auto-paused")
	out, _, _ := d.CLI("dlq", "topics")
	require.Contains(t, out, "replays came back within 10m0s (threshold 2)")
	text := metrics(t, d)
	require.Contains(t, text, `lifecycled_dlq_topic_paused{reason="auto",topic="orders.dlq.v1"} 1`)
	require.Contains(t, text, "lifecycled_dlq_auto_pauses_total 1")

	// Paused: no more republishes, whatever is due (a claim in flight when
	// the pause came may still finish).
	time.Sleep(time.Second)
	sent := endOffset(t, k, "orders.events.v1")
	counts := map[string]int{}
	for _, m := range allMessages(t, d, "orders.dlq.v1") {
		counts[m.ID] = m.RetryCount
	}
	time.Sleep(3 * time.Second)
	require.Equal(t, sent, endOffset(t, k, "orders.events.v1"), "nothing republished while paused")
	for _, m := range allMessages(t, d, "orders.dlq.v1") {
		require.Equal(t, counts[m.ID], m.RetryCount, "no attempt spent while paused")
	}

	_, errOut, code := d.CLI("dlq", "resume", "orders.dlq.v1")
	require.Equal(t, 0, code, errOut)
	testsvc.Eventually(t, time.Minute, func() bool { return endOffset(t, k, "orders.events.v1") > sent }, "retries run again")
}
