package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

// fetchN fetches until n messages came or the time is up.
func fetchN(t *testing.T, s sdk.DLQSource, n int, within time.Duration) []sdk.DeadLetter {
	t.Helper()
	ctx := testsvc.Context(t, within+10*time.Second)
	var got []sdk.DeadLetter
	for deadline := time.Now().Add(within); len(got) < n && time.Now().Before(deadline); {
		resp, err := s.Fetch(ctx, &sdk.FetchRequest{Max: 10, Wait: time.Second})
		require.NoError(t, err)
		got = append(got, resp.Messages...)
	}
	return got
}

// A DLQ topic deleted and created again starts its offsets at 0: the
// reader stayed at the old topic's offset (Offset Out Of Range) and would
// have skipped the new topic's first messages. It starts over from the
// earliest offset, and says so.
func TestRecreatedTopicIsReadFromItsStart(t *testing.T) {
	t.Parallel()
	broker := testsvc.Kafka(t, 1)
	broker.CreateTopics(t, 1, "orders.dlq.v1")
	produce := func(prefix string, n int) {
		t.Helper()
		c := broker.Client(t) // a client of its own: the topic's id changes
		var recs []*kgo.Record
		for i := 0; i < n; i++ {
			recs = append(recs, &kgo.Record{Topic: "orders.dlq.v1", Value: []byte(fmt.Sprintf("%s-%d", prefix, i))})
		}
		require.NoError(t, c.ProduceSync(testsvc.Context(t, 30*time.Second), recs...).FirstErr())
	}
	produce("old", 3)
	s := configured(t, broker.Addr, nil)
	old := fetchN(t, s, 3, 30*time.Second)
	require.Len(t, old, 3)
	positions := make([]sdk.Position, len(old))
	for i, m := range old {
		positions[i] = m.Position
	}
	_, err := s.Commit(testsvc.Context(t, 30*time.Second), &sdk.CommitRequest{Positions: positions})
	require.NoError(t, err)

	_, err = kadm.NewClient(broker.Client(t)).DeleteTopics(testsvc.Context(t, 30*time.Second), "orders.dlq.v1")
	require.NoError(t, err)
	require.Empty(t, fetchN(t, s, 1, 3*time.Second), "the topic is gone (refresh_interval = 1s)")
	broker.CreateTopics(t, 1, "orders.dlq.v1")
	produce("new", 2)

	got := fetchN(t, s, 2, 30*time.Second)
	require.Len(t, got, 2, "both messages of the new topic")
	for i, m := range got {
		require.Equal(t, sdk.LogPosition("orders.dlq.v1", 0, int64(i)), m.Position)
		require.Equal(t, fmt.Sprintf("new-%d", i), string(m.Value))
	}
}

// The group's committed offset lies past the end of the partition (a
// partition truncated, a topic deleted and created again while the group
// kept its offsets): the source does not wait there, nor skip to the end
// because start_offset says latest; it reads the partition from its start.
func TestCommittedOffsetPastTheEndIsReadFromTheStart(t *testing.T) {
	t.Parallel()
	broker := testsvc.Kafka(t, 1)
	broker.CreateTopics(t, 1, "orders.dlq.v1")
	ctx := testsvc.Context(t, time.Minute)
	require.NoError(t, broker.Client(t).ProduceSync(ctx,
		&kgo.Record{Topic: "orders.dlq.v1", Value: []byte("m-0")}, &kgo.Record{Topic: "orders.dlq.v1", Value: []byte("m-1")}).FirstErr())
	var past kadm.Offsets
	past.AddOffset("orders.dlq.v1", 0, 10, -1)
	require.NoError(t, kadm.NewClient(broker.Client(t)).CommitAllOffsets(ctx, "republish", past))

	s := configured(t, broker.Addr, map[string]any{"start_offset": "latest"})
	got := fetchN(t, s, 2, 30*time.Second)
	require.Len(t, got, 2)
	for i, m := range got {
		require.Equal(t, sdk.LogPosition("orders.dlq.v1", 0, int64(i)), m.Position)
		require.Equal(t, fmt.Sprintf("m-%d", i), string(m.Value))
	}
}

// A republish into a topic the source reads dead letters from would only
// come back: refused, permanently.
func TestRepublishIntoADeadLetterTopicIsRefused(t *testing.T) {
	t.Parallel()
	broker := testsvc.Kafka(t, 1)
	s := configured(t, broker.Addr, map[string]any{"topic_pattern": "*-dlq"})
	resp, err := s.Republish(testsvc.Context(t, time.Minute), &sdk.RepublishRequest{Messages: []sdk.RepublishMessage{
		{ID: "1", Topic: "sink-dlq", Value: []byte("x")},
	}})
	require.NoError(t, err)
	require.False(t, resp.Results[0].Acked)
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(resp.Results[0].Err), "%v", resp.Results[0].Err)
	require.ErrorContains(t, resp.Results[0].Err, `matches topic_pattern "*-dlq"`)
}
