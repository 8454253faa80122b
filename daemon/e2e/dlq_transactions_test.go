package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// Issue 27 cases 1 and 2: a transactional producer (Spring Kafka's
// DeadLetterPublishingRecoverer in a transactional container) aborts some
// of the dead letters it writes. With kafka-go the daemon stored the
// aborted records and the transaction markers as dead letters, and the
// automatic retry loop republished them into the original topic with
// nobody acting. Only what was committed is a dead letter, and only that
// ever reaches the original topic.
func TestOnlyCommittedDeadLettersAreStoredAndRepublished(t *testing.T) {
	t.Parallel()
	for _, state := range []string{"sqlite", "postgres"} {
		t.Run(state, func(t *testing.T) {
			k := testsvc.Kafka(t, 1)
			k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1")
			rec := func(value string) *kgo.Record {
				return &kgo.Record{Topic: "orders.dlq.v1", Key: []byte(value), Value: []byte(`{"v":"` + value + `"}`), Headers: []kgo.RecordHeader{
					{Key: "kafka_dlt-original-topic", Value: []byte("orders.events.v1")},
					{Key: "kafka_dlt-exception-message", Value: []byte("failed " + value)}}}
			}
			txn := k.Client(t, kgo.TransactionalID("spring-dlt-"+state))
			ctx := testsvc.Context(t, 2*time.Minute)
			write := func(commit bool, recs ...*kgo.Record) {
				t.Helper()
				require.NoError(t, txn.BeginTransaction())
				require.NoError(t, txn.ProduceSync(ctx, recs...).FirstErr())
				require.NoError(t, txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)))
			}
			write(false, rec("aborted-1"), rec("aborted-2"), rec("aborted-3"))
			write(true, rec("committed-1"), rec("committed-2"))
			write(false, rec("aborted-4"))
			produceSync(t, k, rec("plain-1")) // a producer without transactions, after them all

			d := startDLQDaemon(t, state, kafkaSource(k.Addr)+retryBlock(true, "100ms"))
			waitTotal(t, d, "orders.dlq.v1", 3, time.Minute)
			// The automatic loop republishes every stored message.
			testsvc.Eventually(t, time.Minute, func() bool {
				for _, m := range allMessages(t, d, "orders.dlq.v1") {
					if m.Status != "RESOLVED" {
						return false
					}
				}
				return true
			}, "every stored dead letter republished")
			msgs := allMessages(t, d, "orders.dlq.v1")
			var keys []string
			for _, m := range msgs {
				keys = append(keys, string(m.key(t)))
				require.NotEqual(t, "unknown error", m.ErrorMessage, "a transaction marker has no error header")
			}
			require.ElementsMatch(t, []string{"committed-1", "committed-2", "plain-1"}, keys, "only what was committed")

			recs := consumeRecords(t, k, "orders.events.v1", 3)
			var sent []string
			for _, r := range recs {
				sent = append(sent, string(r.Key))
			}
			require.ElementsMatch(t, []string{"committed-1", "committed-2", "plain-1"}, sent)
			time.Sleep(time.Second) // a late republish would show up now
			ends, err := kadm.NewClient(k.Client(t)).ListEndOffsets(ctx, "orders.events.v1")
			require.NoError(t, err)
			end, ok := ends.Lookup("orders.events.v1", 0)
			require.True(t, ok)
			require.EqualValues(t, 3, end.Offset, "nothing aborted, and no marker, ever reaches the original topic")
			require.Len(t, allMessages(t, d, "orders.dlq.v1"), 3, "and nothing more was taken in")
		})
	}
}
