package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// The case: a header key that is not UTF-8 at offset 2 between good
// messages. Before, the fetch failed in gRPC marshalling, the reader had
// moved on and the next commit covered offsets 0-4: the batch was gone.
func TestBinaryHeaderKeysAreStoredAndRepublishedByteForByte(t *testing.T) {
	t.Parallel()
	for _, state := range []string{"sqlite", "postgres"} {
		t.Run(state, func(t *testing.T) {
			k := testsvc.Kafka(t, 1)
			k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1")
			good := func(n string) {
				k.Kcat(t, `{"n":`+n+`}`+"\n", "-P", "-t", "orders.dlq.v1", "-H", "error=e"+n)
			}
			good("0")
			good("1")
			// kcat, an outside producer: key and header with bytes that are not UTF-8.
			k.Kcat(t, "v\xff2\n", "-P", "-t", "orders.dlq.v1", "-k", "k\xfe2", "-H", "bad\xffkey=v\xfe", "-H", "error=e2")
			good("3")
			good("4")
			// A Go client: NUL and invalid UTF-8 in key, header key, header value and value.
			produceSync(t, k, &kgo.Record{Topic: "orders.dlq.v1", Key: []byte{0, 0xff, 1}, Value: []byte{0, 1, 0xff, '\n'},
				Headers: []kgo.RecordHeader{{Key: "\x00\xfe", Value: []byte{0xff, 0}}, {Key: "text", Value: []byte("ok")}, {Key: "error", Value: []byte("e5")}}})

			d := startDLQDaemon(t, state, kafkaSource(k.Addr)+retryBlock(false, "1m"))
			waitTotal(t, d, "orders.dlq.v1", 6, time.Minute)

			check := func() (messageJSON, messageJSON) {
				t.Helper()
				msgs := byOffset(allMessages(t, d, "orders.dlq.v1"))
				require.Len(t, msgs, 6, "every offset stored once")
				for off := int64(0); off < 6; off++ {
					require.Contains(t, msgs, off)
				}
				m2, m5 := msgs[2], msgs[5]
				require.Equal(t, "e2", m2.ErrorMessage)
				require.Equal(t, []byte("k\xfe2"), m2.key(t))
				require.Nil(t, m2.Key, "a key that is not UTF-8 is not shown as text")
				require.NotNil(t, m2.KeyBase64)
				require.Equal(t, []rawHeader{{[]byte("bad\xffkey"), []byte("v\xfe")}, {[]byte("error"), []byte("e2")}}, m2.headers(t))
				require.Nil(t, m2.Headers[0].Key)
				require.Equal(t, "error", *m2.Headers[1].Key, "UTF-8 keys are text")
				require.Equal(t, []byte{0, 0xff, 1}, m5.key(t))
				require.Equal(t, []rawHeader{{[]byte("\x00\xfe"), []byte{0xff, 0}}, {[]byte("text"), []byte("ok")}, {[]byte("error"), []byte("e5")}}, m5.headers(t))
				return m2, m5
			}
			check()
			d.Kill9()
			d.Restarted(t)
			time.Sleep(2 * time.Second) // a redelivery would show up now
			m2, m5 := check()

			for _, id := range []string{m2.ID, m5.ID} {
				var retried map[string]any
				apitest.Expect(t, d, 200, &retried).RetryMessage(t.Context(), id)
				require.Equal(t, "RESOLVED", retried["status"])
			}
			recs := consumeRecords(t, k, "orders.events.v1", 2)
			require.Equal(t, []byte("k\xfe2"), recs[0].Key)
			require.Equal(t, []byte("v\xff2"), recs[0].Value)
			require.Equal(t, []rawHeader{{[]byte("bad\xffkey"), []byte("v\xfe")}, {[]byte("error"), []byte("e2")}}, withoutDLQHeaders(recs[0].Headers))
			require.Equal(t, []byte{0, 0xff, 1}, recs[1].Key)
			require.Equal(t, []byte{0, 1, 0xff, '\n'}, recs[1].Value)
			require.Equal(t, []rawHeader{{[]byte("\x00\xfe"), []byte{0xff, 0}}, {[]byte("text"), []byte("ok")}, {[]byte("error"), []byte("e5")}}, withoutDLQHeaders(recs[1].Headers))
		})
	}
}
