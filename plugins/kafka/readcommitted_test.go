package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

// transaction produces recs in one transaction of c and commits or aborts it.
func transaction(t *testing.T, c *kgo.Client, commit bool, recs ...*kgo.Record) {
	t.Helper()
	ctx := testsvc.Context(t, time.Minute)
	require.NoError(t, c.BeginTransaction())
	require.NoError(t, c.ProduceSync(ctx, recs...).FirstErr())
	require.NoError(t, c.EndTransaction(ctx, kgo.TransactionEndTry(commit)))
}

func dlqRecord(key, value string, headers ...kgo.RecordHeader) *kgo.Record {
	return &kgo.Record{Topic: "orders.dlq.v1", Key: []byte(key), Value: []byte(value), Headers: headers}
}

// A producer that writes dead letters in transactions (Kafka Streams and
// Spring with exactly-once do) aborts some: those records are not dead
// letters, and neither are the markers that end each transaction. kafka-go
// read them all (read_uncommitted, control records as messages).
func TestAbortedTransactionsAndControlRecordsAreNotDeadLetters(t *testing.T) {
	t.Parallel()
	broker := testsvc.Kafka(t, 1)
	broker.CreateTopics(t, 1, "orders.dlq.v1")
	txn := broker.Client(t, kgo.TransactionalID("dlq-writer"))
	transaction(t, txn, false,
		dlqRecord("a1", `{"aborted":1}`, kgo.RecordHeader{Key: "error", Value: []byte("never happened")}),
		dlqRecord("a2", `{"aborted":2}`),
		dlqRecord("a3", `{"aborted":3}`))
	want := []*kgo.Record{
		dlqRecord("c1", `{"committed":1}`, kgo.RecordHeader{Key: "error", Value: []byte("boom")}, kgo.RecordHeader{Key: "bin\xffkey", Value: []byte{0, 0xfe}}),
		dlqRecord("c2", "raw \x00 bytes"),
		dlqRecord("p1", `{"plain":1}`, kgo.RecordHeader{Key: "error", Value: []byte("plain failure")}),
	}
	transaction(t, txn, true, want[0], want[1])
	require.NoError(t, broker.Client(t).ProduceSync(testsvc.Context(t, time.Minute), want[2]).FirstErr())

	s := configured(t, broker.Addr, nil)
	got := fetchN(t, s, len(want), 30*time.Second)
	got = append(got, fetchN(t, s, 1, 3*time.Second)...)
	require.Len(t, got, len(want), "only the committed and the plain records: %v", got)
	for i, m := range got {
		require.Equal(t, "orders.dlq.v1", m.Position.Topic)
		require.Equal(t, want[i].Key, m.Key)
		require.Equal(t, want[i].Value, m.Value)
		require.Len(t, m.Headers, len(want[i].Headers))
		for j, h := range want[i].Headers {
			require.Equal(t, sdk.Header{Key: []byte(h.Key), Value: h.Value}, m.Headers[j])
		}
	}
	// 0-2 aborted, 3 its abort marker, 4-5 committed, 6 its commit marker.
	var read []int64
	for _, m := range got {
		_, o, _ := sdk.ParseLogPosition(m.Position.ID)
		read = append(read, o)
	}
	require.Equal(t, []int64{4, 5, 7}, read)

	_, err := s.Commit(testsvc.Context(t, time.Minute), &sdk.CommitRequest{Positions: []sdk.Position{got[1].Position, got[2].Position, got[0].Position}})
	require.NoError(t, err)
	offsets, err := kadm.NewClient(broker.Client(t)).FetchOffsets(testsvc.Context(t, time.Minute), "republish")
	require.NoError(t, err)
	committed, ok := offsets.Lookup("orders.dlq.v1", 0)
	require.True(t, ok)
	require.EqualValues(t, 8, committed.At, "the offset after the highest position committed")
}

// Reading stops at the last stable offset: a record behind an open
// transaction waits for it, and comes once it is committed.
func TestReadingStopsAtTheLastStableOffset(t *testing.T) {
	t.Parallel()
	broker := testsvc.Kafka(t, 1)
	broker.CreateTopics(t, 1, "orders.dlq.v1")
	ctx := testsvc.Context(t, time.Minute)
	txn := broker.Client(t, kgo.TransactionalID("dlq-writer"))
	require.NoError(t, txn.BeginTransaction())
	require.NoError(t, txn.ProduceSync(ctx, dlqRecord("t1", "in the transaction")).FirstErr())
	require.NoError(t, broker.Client(t).ProduceSync(ctx, dlqRecord("p1", "behind it")).FirstErr())

	s := configured(t, broker.Addr, nil)
	require.Empty(t, fetchN(t, s, 1, 4*time.Second), "nothing is stable yet")
	require.NoError(t, txn.EndTransaction(ctx, kgo.TryCommit))
	got := fetchN(t, s, 2, 30*time.Second)
	require.Len(t, got, 2)
	require.Equal(t, "in the transaction", string(got[0].Value))
	require.Equal(t, "behind it", string(got[1].Value))
}
