package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

// inProcess is the source configured in the test's own process, to check
// the plugin itself apart from the plugin protocol.
func inProcess(t *testing.T, addr string) sdk.DLQSource {
	t.Helper()
	s := &source{}
	_, err := s.Configure(testsvc.Context(t, time.Minute), &sdk.ConfigureRequest{Name: "kafka", Config: map[string]any{
		"brokers": []any{addr}, "group_id": "nulls", "refresh_interval": "1s", "session_timeout": "2s"}})
	require.NoError(t, err)
	return s
}

// requireNull checks that got is null (nil) when want is, and empty but
// not null when want is empty: require.Equal takes the two for one.
func requireNull(t *testing.T, want, got []byte, what string) {
	t.Helper()
	require.Equal(t, want == nil, got == nil, "%s: want null=%v, got %q (null=%v)", what, want == nil, got, got == nil)
	require.Equal(t, string(want), string(got), what)
}

// A tombstone (null value) in a DLQ is a delete that failed; an empty value
// is a message. A null key and an empty key partition and compact apart.
// kafka-go read an empty key as none and an empty value or header value
// as null, and wrote a null value as empty.
func TestNullIsNotEmpty(t *testing.T) {
	t.Parallel()
	broker := testsvc.Kafka(t, 1)
	broker.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1")
	ctx := testsvc.Context(t, time.Minute)
	null := &kgo.Record{Topic: "orders.dlq.v1", Headers: []kgo.RecordHeader{{Key: "error"}}}
	empty := &kgo.Record{Topic: "orders.dlq.v1", Key: []byte{}, Value: []byte{}, Headers: []kgo.RecordHeader{{Key: "error", Value: []byte{}}}}
	require.NoError(t, broker.Client(t).ProduceSync(ctx, null, empty).FirstErr())

	t.Run("fetched", func(t *testing.T) {
		got := fetchN(t, inProcess(t, broker.Addr), 2, 30*time.Second)
		require.Len(t, got, 2)
		for i, want := range []*kgo.Record{null, empty} {
			requireNull(t, want.Key, got[i].Key, "key")
			requireNull(t, want.Value, got[i].Value, "value")
			require.Len(t, got[i].Headers, 1)
			requireNull(t, want.Headers[0].Value, got[i].Headers[0].Value, "header value")
		}
	})

	t.Run("fetched through the plugin protocol", func(t *testing.T) {
		got := fetchN(t, configured(t, broker.Addr, nil), 2, 30*time.Second)
		require.Len(t, got, 2)
		for i, want := range []*kgo.Record{null, empty} {
			requireNull(t, want.Key, got[i].Key, "key")
			requireNull(t, want.Value, got[i].Value, "value")
			require.Len(t, got[i].Headers, 1)
			requireNull(t, want.Headers[0].Value, got[i].Headers[0].Value, "header value")
		}
	})

	t.Run("republished", func(t *testing.T) {
		headers := func(id string) []sdk.Header {
			// In order, duplicates kept, null and empty apart.
			return []sdk.Header{{Key: []byte("h"), Value: nil}, {Key: []byte("h"), Value: []byte{}}, {Key: []byte("h"), Value: []byte("v")},
				{Key: []byte("x-dlq-id"), Value: []byte(id)}}
		}
		msgs := []sdk.RepublishMessage{
			{ID: "null", Topic: "orders.events.v1", Headers: headers("null")},
			{ID: "empty", Topic: "orders.events.v1", Key: []byte{}, Value: []byte{}, Headers: headers("empty")},
		}
		resp, err := inProcess(t, broker.Addr).Republish(ctx, &sdk.RepublishRequest{Messages: msgs})
		require.NoError(t, err)
		for _, r := range resp.Results {
			require.True(t, r.Acked, "%s: %v", r.ID, r.Err)
		}
		c := broker.Client(t, kgo.ConsumeTopics("orders.events.v1"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		var got []*kgo.Record
		for len(got) < 2 && ctx.Err() == nil {
			got = append(got, c.PollFetches(ctx).Records()...)
		}
		require.Len(t, got, 2)
		for i, want := range msgs {
			requireNull(t, want.Key, got[i].Key, want.ID+" key")
			requireNull(t, want.Value, got[i].Value, want.ID+" value")
			require.Len(t, got[i].Headers, len(want.Headers))
			for j, h := range want.Headers {
				require.Equal(t, string(h.Key), got[i].Headers[j].Key)
				requireNull(t, h.Value, got[i].Headers[j].Value, want.ID+" header "+string(h.Key))
			}
		}
	})
}
