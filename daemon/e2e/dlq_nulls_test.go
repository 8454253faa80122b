package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// A tombstone (null value) on a DLQ is a delete that failed, and going back
// as an empty record it is no delete on a compacted topic; a null key and
// an empty key partition and compact apart; a null header value is not an
// empty one. Issue 27 case 4: all three were stored and shown as empty, and
// a tombstone went back as an empty record.
func TestNullAndEmptyStayApartFromIntakeToRepublish(t *testing.T) {
	t.Parallel()
	for _, state := range []string{"sqlite", "postgres"} {
		t.Run(state, func(t *testing.T) {
			k := testsvc.Kafka(t, 1)
			k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1")
			null := &kgo.Record{Topic: "orders.dlq.v1", Headers: []kgo.RecordHeader{{Key: "error", Value: []byte("e0")}, {Key: "trace"}}}
			empty := &kgo.Record{Topic: "orders.dlq.v1", Key: []byte{}, Value: []byte{},
				Headers: []kgo.RecordHeader{{Key: "error", Value: []byte("e1")}, {Key: "trace", Value: []byte{}}}}
			produceSync(t, k, null, empty)

			d := startDLQDaemon(t, state, kafkaSource(k.Addr)+retryBlock(false, "1m"))
			waitTotal(t, d, "orders.dlq.v1", 2, time.Minute)
			msgs := byOffset(allMessages(t, d, "orders.dlq.v1"))
			require.Len(t, msgs, 2)

			raw := func(id string) map[string]any {
				t.Helper()
				var m map[string]any
				apitest.Expect(t, d, 200, &m).Message(t.Context(), id)
				return m
			}
			// present reports whether the field is in the object, and its value.
			present := func(m map[string]any, field string) (any, bool) { v, ok := m[field]; return v, ok }

			tomb := raw(msgs[0].ID)
			v, ok := present(tomb, "payload_base64")
			require.True(t, ok, "a null value says so: payload_base64 is null, not absent: %v", tomb)
			require.Nil(t, v)
			require.Nil(t, tomb["payload"])
			require.Nil(t, tomb["key"], "a null key")
			v, ok = present(tomb, "key_base64")
			require.True(t, ok, "a null key says so: key_base64 is null, not absent")
			require.Nil(t, v)
			trace := tomb["headers"].([]any)[1].(map[string]any)
			require.Equal(t, "trace", trace["key"])
			require.Nil(t, trace["value"])
			v, ok = present(trace, "value_base64")
			require.True(t, ok, "a null header value says so: value_base64 is null, not absent")
			require.Nil(t, v)
			require.NotEqual(t, true, tomb["truncated"], "a tombstone is not a message too large to keep")

			emp := raw(msgs[1].ID)
			require.Equal(t, "", emp["payload_base64"], "an empty value is zero bytes")
			require.Equal(t, "", emp["key"], "an empty key is a key")
			_, ok = present(emp, "key_base64")
			require.False(t, ok)
			trace = emp["headers"].([]any)[1].(map[string]any)
			require.Equal(t, "", trace["value"])
			_, ok = present(trace, "value_base64")
			require.False(t, ok)

			for _, id := range []string{msgs[0].ID, msgs[1].ID} {
				var retried map[string]any
				apitest.Expect(t, d, 200, &retried).RetryMessage(t.Context(), id)
				require.Equal(t, "RESOLVED", retried["status"])
			}
			recs := consumeRecords(t, k, "orders.events.v1", 2)
			require.Nil(t, recs[0].Value, "a tombstone goes back as a tombstone")
			require.Nil(t, recs[0].Key)
			require.Equal(t, []rawHeader{{[]byte("error"), []byte("e0")}, {[]byte("trace"), nil}}, withoutDLQHeaders(recs[0].Headers))
			require.Nil(t, withoutDLQHeaders(recs[0].Headers)[1].value)
			require.NotNil(t, recs[1].Value, "an empty value goes back empty")
			require.Empty(t, recs[1].Value)
			require.NotNil(t, recs[1].Key)
			require.NotNil(t, withoutDLQHeaders(recs[1].Headers)[1].value)
		})
	}
}
