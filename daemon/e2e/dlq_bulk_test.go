package e2e

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/daemon/wire"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// operationJSON is a bulk operation as the API answers it.
type operationJSON struct {
	ID        string           `json:"id"`
	Action    string           `json:"action"`
	State     string           `json:"state"`
	Matched   int64            `json:"matched"`
	Done      int64            `json:"done"`
	Succeeded int64            `json:"succeeded"`
	Failed    int64            `json:"failed"`
	Outcomes  map[string]int64 `json:"outcomes"`
	Rate      float64          `json:"rate"`
	StartedAt *string          `json:"started_at"`
}

func getOperation(t *testing.T, d *testsvc.Daemon, id string) operationJSON {
	t.Helper()
	var op operationJSON
	apitest.Expect(t, d, 200, &op).Operation(t.Context(), id)
	return op
}

// stateDigests is every message of a topic by id, digested: what a bulk
// operation must leave alone.
func stateDigests(t *testing.T, d *testsvc.Daemon, topic string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range allMessages(t, d, topic) {
		b, err := json.Marshal(m)
		require.NoError(t, err)
		out[m.ID] = fmt.Sprintf("%x", sha256.Sum256(b))
	}
	return out
}

// A storm of two failures: the CLI retries one failure group at a rate,
// waiting with progress; exactly that group is republished through the
// broker, once each, and the other group's messages do not change. Bad
// requests are refused with the field named and store nothing.
func TestBulkRetryOfAGroupThroughTheCLI(t *testing.T) {
	t.Parallel()
	for _, state := range []string{"sqlite", "postgres"} {
		t.Run(state, func(t *testing.T) {
			k := testsvc.Kafka(t, 1)
			k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1")
			d := startDLQDaemon(t, state, kafkaSource(k.Addr)+retryBlock(false, "1h"))
			var timeouts, schema strings.Builder
			for i := 0; i < 200; i++ {
				fmt.Fprintf(&timeouts, "{\"n\":%d}\n", i)
			}
			for i := 0; i < 40; i++ {
				fmt.Fprintf(&schema, "{\"m\":%d}\n", i)
			}
			k.Kcat(t, timeouts.String(), "-P", "-t", "orders.dlq.v1", "-H", "kafka_dlt-original-topic=orders.events.v1",
				"-H", "kafka_dlt-exception-message=java.net.SocketTimeoutException: Read timed out after 30000 ms")
			k.Kcat(t, schema.String(), "-P", "-t", "orders.dlq.v1", "-H", "kafka_dlt-original-topic=orders.events.v1",
				"-H", "kafka_dlt-exception-message=Schema mismatch: field customer_id missing")
			waitTotal(t, d, "orders.dlq.v1", 240, time.Minute)

			var groups struct {
				Groups []struct {
					ID          string `json:"id"`
					SampleError string `json:"sample_error"`
				} `json:"groups"`
			}
			apitest.Expect(t, d, 200, &groups).Groups(t.Context(), nil)
			var group string
			for _, g := range groups.Groups {
				if strings.Contains(g.SampleError, "SocketTimeoutException") {
					group = g.ID
				}
			}
			require.NotEmpty(t, group)
			before := stateDigests(t, d, "orders.dlq.v1")

			// Refused: nothing is stored.
			for body, field := range map[string]string{
				`{"action":"nuke","filter":{"group":"` + group + `"}}`: "action",
				`{"action":"retry"}`: "filter",
				`{"action":"retry","filter":{"group":"` + group + `"},"rate":-5}`:                          "rate",
				`{"action":"retry","filter":{"colour":"red"}}`:                                             "filter",
				`{"action":"retry","filter":{"status":["LOST"]}}`:                                          "status",
				`{"action":"replay_to","filter":{"group":"` + group + `"}}`:                                "target_topic",
				`{"action":"retry","filter":{"group":"x"},"ids":["` + group + `"]}`:                        "ids",
				`{"action":"delete","filter":{"group":"` + group + `"},"surprise":true}`:                   "surprise",
				`{"action":"dead","filter":{"topic":"orders.dlq.v1","status":[]}}`:                         "status",
				`{"action":"dead","filter":{"key":""}}`:                                                    "key",
				`{"action":"replay_to","filter":{"group":"` + group + `"},"target_topic":"orders.dlq.v1"}`: "target_topic",
			} {
				code, resp := apitest.Refused(apitest.Client(d).StartOperation(t.Context(), wire.OperationRequest{}, adminclient.Body([]byte(body))))(t)
				require.Equal(t, 400, code, "%s: %s", body, resp)
				require.Contains(t, string(resp), field, body)
			}
			var ops struct {
				Operations []operationJSON `json:"operations"`
			}
			apitest.Expect(t, d, 200, &ops).Operations(t.Context(), nil)
			require.Empty(t, ops.Operations, "a refused request stores nothing")

			out, errOut, code := d.CLI("dlq", "bulk", "retry", "--group", group, "--dry-run")
			require.Equal(t, 0, code, errOut)
			require.Contains(t, out, "would act on 200 messages")
			require.Equal(t, before, stateDigests(t, d, "orders.dlq.v1"), "a dry run changes nothing")

			out, errOut, code = d.CLI("dlq", "bulk", "retry", "--group", group, "--rate", "500", "--wait")
			require.Equal(t, 0, code, "%s\n%s", out, errOut)
			require.Contains(t, out, "COMPLETED")
			require.Contains(t, out, "200/200 (200 succeeded, 0 failed)")
			require.Contains(t, errOut, "retry", "progress went to stderr")

			apitest.Expect(t, d, 200, &ops).Operations(t.Context(), nil)
			require.Len(t, ops.Operations, 1)
			op := ops.Operations[0]
			require.Equal(t, "COMPLETED", op.State)
			require.Equal(t, map[string]int64{"retried": 200}, op.Outcomes)

			// Through the broker: exactly the group, once each.
			ids := map[string]int{}
			for _, m := range consumeKcat(t, k, "orders.events.v1") {
				id, ok := header(m, "x-dlq-id")
				require.True(t, ok)
				ids[id]++
			}
			require.Len(t, ids, 200)
			after := stateDigests(t, d, "orders.dlq.v1")
			changed := 0
			for id, sum := range before {
				if ids[id] > 0 {
					require.Equal(t, 1, ids[id], "republished once")
					require.Equal(t, "RESOLVED", getMessage(t, d, id).Status)
					changed++
					continue
				}
				require.Equal(t, sum, after[id], "a message of the other group does not change")
			}
			require.Equal(t, 200, changed)

			// The history names the operation.
			for id := range ids {
				var h struct {
					Events []struct {
						Kind   string          `json:"kind"`
						Detail json.RawMessage `json:"detail"`
						UID    *int            `json:"uid"`
					} `json:"events"`
				}
				apitest.Expect(t, d, 200, &h).History(t.Context(), id)
				last := h.Events[len(h.Events)-1]
				require.Equal(t, "attempt", last.Kind)
				require.Contains(t, string(last.Detail), op.ID)
				require.NotNil(t, last.UID)
				break
			}
		})
	}
}

// A daemon killed (SIGKILL) in the middle of a bulk retry: the operation
// is RUNNING after the restart, resumes where its last recorded page
// ended, and completes; every message is RESOLVED and reached the broker
// (at least once: a page in flight at the kill may be sent twice).
func TestKill9DuringBulkRetryResumes(t *testing.T) {
	t.Parallel()
	const n = 3000
	k := testsvc.Kafka(t, 1)
	k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1")
	produce(t, k, "orders.dlq.v1", n)
	o := testsvc.DaemonOptions{State: testsvc.PGDatabase(t), Extra: kafkaSource(k.Addr) + retryBlock(false, "1h")}
	d := testsvc.StartDaemon(t, o)
	waitTotal(t, d, "orders.dlq.v1", n, 2*time.Minute)

	var op operationJSON
	apitest.Expect(t, d, 202, &op).StartOperation(t.Context(), wire.OperationRequest{Action: "retry", Filter: json.RawMessage(`{"topic":"orders.dlq.v1"}`), Rate: new(1000.0)})
	require.EqualValues(t, n, op.Matched)
	testsvc.Eventually(t, time.Minute, func() bool { return getOperation(t, d, op.ID).Done >= 400 }, "under way")
	d.Kill9()
	d.Restarted(t)
	mid := getOperation(t, d, op.ID)
	t.Logf("after the kill: %d/%d done", mid.Done, n)
	require.Less(t, mid.Done, int64(n), "killed in the middle")

	testsvc.Eventually(t, 2*time.Minute, func() bool { return getOperation(t, d, op.ID).State == "COMPLETED" }, "resumed and completed")
	done := getOperation(t, d, op.ID)
	require.EqualValues(t, n, done.Done, "every item counted once")
	testsvc.Eventually(t, time.Minute, func() bool {
		return list(t, d, "orders.dlq.v1", "&status=RESOLVED&page_size=1").Pagination.TotalCount == n
	}, "every message RESOLVED")
	ids := map[string]int{}
	for _, m := range consumeKcat(t, k, "orders.events.v1") {
		id, ok := header(m, "x-dlq-id")
		require.True(t, ok)
		ids[id]++
	}
	require.Len(t, ids, n)
}

// A rate-limited bulk operation cancelled from the CLI stops between two
// pages; the rest of its set is left as it was.
func TestBulkCancelThroughTheCLI(t *testing.T) {
	t.Parallel()
	k := testsvc.Kafka(t, 1)
	k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1")
	produce(t, k, "orders.dlq.v1", 400)
	d := startDLQDaemon(t, "sqlite", kafkaSource(k.Addr)+retryBlock(false, "1h"))
	waitTotal(t, d, "orders.dlq.v1", 400, time.Minute)
	before := stateDigests(t, d, "orders.dlq.v1")
	out, errOut, code := d.CLI("--format", "json", "dlq", "bulk", "dead", "--topic", "orders.dlq.v1", "--rate", "50")
	require.Equal(t, 0, code, errOut)
	var op operationJSON
	require.NoError(t, json.Unmarshal([]byte(out), &op), out)
	testsvc.Eventually(t, time.Minute, func() bool { return getOperation(t, d, op.ID).Done >= 20 }, "under way")
	out, errOut, code = d.CLI("dlq", "operation", "cancel", op.ID)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, op.ID)
	testsvc.Eventually(t, 30*time.Second, func() bool { return getOperation(t, d, op.ID).State == "CANCELLED" }, "cancelled")
	final := getOperation(t, d, op.ID)
	require.Less(t, final.Done, int64(400))
	after := stateDigests(t, d, "orders.dlq.v1")
	dead := 0
	for id, sum := range before {
		if getMessage(t, d, id).Status == "DEAD" {
			dead++
			continue
		}
		require.Equal(t, sum, after[id], "not reached: unchanged")
	}
	require.EqualValues(t, final.Succeeded, dead, "the counters say what changed")
	_, _, code = d.CLI("dlq", "operation", op.ID, "--wait")
	require.Equal(t, 3, code, "waiting on a cancelled operation exits 3")
}

// The same POST with the same Idempotency-Key starts one operation: the
// second answer is the first one's.
func TestBulkOperationIdempotencyKey(t *testing.T) {
	t.Parallel()
	k := testsvc.Kafka(t, 1)
	k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1")
	produce(t, k, "orders.dlq.v1", 20)
	d := startDLQDaemon(t, "sqlite", kafkaSource(k.Addr)+retryBlock(false, "1h"))
	waitTotal(t, d, "orders.dlq.v1", 20, time.Minute)
	req := wire.OperationRequest{Action: "dead", Filter: json.RawMessage(`{"topic":"orders.dlq.v1"}`), Rate: new(5.0)}
	key := adminclient.IdempotencyKey("bulk-once")
	var a, b operationJSON
	apitest.Expect(t, d, 202, &a).StartOperation(t.Context(), req, key)
	apitest.Expect(t, d, 202, &b).StartOperation(t.Context(), req, key)
	require.Equal(t, a.ID, b.ID)
	var ops struct {
		Operations []operationJSON `json:"operations"`
	}
	apitest.Expect(t, d, 200, &ops).Operations(t.Context(), nil)
	require.Len(t, ops.Operations, 1)
}

// twoDaemons is a rated bulk retry of n dead letters of orders.dlq.v1 under
// way on one of two daemons that share a PostgreSQL state store, beside 40
// dead letters of billing.dlq.v1 that nothing may touch.
type twoDaemons struct {
	k          *testsvc.KafkaBroker
	op         operationJSON
	n          int
	bystanders map[string]string
	// running runs the operation, with at least 40 done; other is the
	// other daemon.
	running, other *testsvc.Daemon
}

// startBulkRetryOnOneOfTwo starts the two daemons with the given lease,
// calls beforeRetry (with the messages stored), starts the retry at 20/s
// and waits until one daemon has done 40.
func startBulkRetryOnOneOfTwo(t *testing.T, n int, lease string, beforeRetry func(*testsvc.KafkaBroker)) *twoDaemons {
	t.Helper()
	f := &twoDaemons{k: testsvc.Kafka(t, 1), n: n}
	f.k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1", "billing.dlq.v1", "billing.events.v1")
	produce(t, f.k, "orders.dlq.v1", n)
	produce(t, f.k, "billing.dlq.v1", 40)
	state := testsvc.PGDatabase(t)
	retry := strings.Replace(retryBlock(false, "1h"), `lease = "2s"`, `lease = "`+lease+`"`, 1)
	require.Contains(t, retry, `lease = "`+lease+`"`)
	extra := kafkaSource(f.k.Addr) + retry
	daemons := []*testsvc.Daemon{
		testsvc.StartDaemon(t, testsvc.DaemonOptions{State: state, Extra: extra}),
		testsvc.StartDaemon(t, testsvc.DaemonOptions{State: state, Extra: extra}),
	}
	waitTotal(t, daemons[0], "orders.dlq.v1", n, 2*time.Minute)
	waitTotal(t, daemons[0], "billing.dlq.v1", 40, 2*time.Minute)
	f.bystanders = stateDigests(t, daemons[0], "billing.dlq.v1")
	if beforeRetry != nil {
		beforeRetry(f.k)
	}

	apitest.Expect(t, daemons[0], 202, &f.op).StartOperation(t.Context(), wire.OperationRequest{Action: "retry", Filter: json.RawMessage(`{"topic":"orders.dlq.v1"}`), Rate: new(20.0)})
	require.EqualValues(t, n, f.op.Matched)
	// Which daemon runs it is whichever claimed it first. At 20/s the rest
	// takes the other daemon 8 s: what the test does next is read before
	// it ends.
	testsvc.Eventually(t, time.Minute, func() bool {
		done, by := f.progress(t, daemons[0])
		for i, d := range daemons {
			if done >= 40 && strings.Contains(by, holder(d)) {
				f.running, f.other = d, daemons[1-i]
			}
		}
		return f.running != nil
	}, "under way on one daemon")
	return f
}

// holder is how an operation's daemon field names d.
func holder(d *testsvc.Daemon) string { return fmt.Sprintf("/%d/", d.PID()) }

// progress is how much of the operation is done, and which daemon holds it,
// as d reads it.
func (f *twoDaemons) progress(t *testing.T, d *testsvc.Daemon) (int64, string) {
	t.Helper()
	var o struct {
		Done   int64  `json:"done"`
		Daemon string `json:"daemon"`
	}
	apitest.Expect(t, d, 200, &o).Operation(t.Context(), f.op.ID)
	return o.Done, o.Daemon
}

// requireCompletedOnce waits until the other daemon completed the
// operation and checks that every message was counted, RESOLVED and sent
// once, and that nothing of billing.dlq.v1 changed or was sent.
func (f *twoDaemons) requireCompletedOnce(t *testing.T) {
	t.Helper()
	testsvc.Eventually(t, time.Minute, func() bool { return getOperation(t, f.other, f.op.ID).State == "COMPLETED" }, "completed by the other daemon")
	done := getOperation(t, f.other, f.op.ID)
	require.EqualValues(t, f.n, done.Done)
	require.Equal(t, map[string]int64{"retried": int64(f.n)}, done.Outcomes, "each message counted once")
	require.EqualValues(t, f.n, list(t, f.other, "orders.dlq.v1", "&status=RESOLVED&page_size=1").Pagination.TotalCount, "every message RESOLVED")
	sent := map[string]int{}
	for _, m := range consumeKcat(t, f.k, "orders.events.v1") {
		id, ok := header(m, "x-dlq-id")
		require.True(t, ok)
		sent[id]++
	}
	require.Len(t, sent, f.n)
	for id, times := range sent {
		require.Equal(t, 1, times, "%s sent once", id)
	}
	require.Empty(t, consumeKcat(t, f.k, "billing.events.v1"), "nothing of the other topic was sent")
	require.Equal(t, f.bystanders, stateDigests(t, f.other, "billing.dlq.v1"), "the other topic's dead letters are unchanged")
}

// Two daemons share a PostgreSQL state store. The one running a rated bulk
// retry is stopped (SIGTERM) in the middle: it hands the operation back,
// and the other takes it at once (the lease, ten minutes, is far from
// over) and completes it. Every message of the set reaches the broker
// exactly once (on PostgreSQL a claim is a row lock held to the outcome)
// and is RESOLVED, and the other topic's dead letters do not change.
func TestABulkRetryMovesToTheOtherDaemonWhenItsDaemonStops(t *testing.T) {
	t.Parallel()
	const n = 200
	f := startBulkRetryOnOneOfTwo(t, n, "10m", nil)
	f.running.Signal(syscall.SIGTERM)
	require.Equal(t, 0, f.running.Wait(time.Minute))
	mid := getOperation(t, f.other, f.op.ID)
	t.Logf("after the stop: %d/%d done", mid.Done, n)
	require.Equal(t, "RUNNING", mid.State, "a stop is not an end")
	require.Less(t, mid.Done, int64(n), "stopped in the middle")
	// Well within the lease: only a hand-back lets the other daemon in.
	f.requireCompletedOnce(t)
}

// Two daemons share a PostgreSQL state store. The one running a rated bulk
// retry is frozen (SIGSTOP) in the middle, a page almost surely under way
// (the broker answers sends late): its lease (5 s) runs out and the other
// daemon takes the operation over. A page the frozen daemon holds keeps
// its messages locked, so the other waits for them; when the frozen one
// thaws (SIGCONT) it records that page's outcomes, finds the operation
// lost and lets it go, and the other completes it. Every message of the
// set reaches the broker exactly once and is RESOLVED and counted once,
// the other topic's dead letters do not change, and the thawed daemon
// serves on.
func TestABulkRetryTakenFromAFrozenDaemonSendsEachMessageOnce(t *testing.T) {
	t.Parallel()
	const n = 200
	// Each send takes 300 ms at the broker: at 20/s, a page of 4 is out
	// most of the time, so the freeze almost always holds one.
	f := startBulkRetryOnOneOfTwo(t, n, "5s", func(k *testsvc.KafkaBroker) { k.SlowProduce(300 * time.Millisecond) })
	frozen := f.running
	frozen.Signal(syscall.SIGSTOP)
	t.Cleanup(func() { frozen.Signal(syscall.SIGCONT) }) // before the daemons' own clean-up stops them
	atFreeze, _ := f.progress(t, f.other)
	t.Logf("frozen at %d/%d done", atFreeze, n)

	testsvc.Eventually(t, time.Minute, func() bool {
		_, by := f.progress(t, f.other)
		return strings.Contains(by, holder(f.other))
	}, "taken over by the other daemon once the lease ran out")
	// The other runs while the first stays frozen: any page the frozen one
	// holds waits for it.
	time.Sleep(3 * time.Second)
	frozen.Signal(syscall.SIGCONT)
	f.requireCompletedOnce(t)

	// The thawed daemon serves on and knows it lost the operation.
	frozen.WaitServing(30 * time.Second)
	testsvc.Eventually(t, 30*time.Second, func() bool { return strings.Contains(frozen.Logs(), "lease lost") }, "the thawed daemon says it lost the lease")
	require.Equal(t, "COMPLETED", getOperation(t, frozen, f.op.ID).State)
}
