package dlq

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/sdk"
)

func hs(kv ...string) []sdk.Header {
	var out []sdk.Header
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, sdk.Header{Key: []byte(kv[i]), Value: []byte(kv[i+1])})
	}
	return out
}

func TestInterpretHeaders(t *testing.T) {
	id := uuid.New()
	tests := map[string]struct {
		headers      []sdk.Header
		mapped       string
		wantOriginal string
		// wantLastError says why there is no original topic.
		wantLastError string
		wantError     string
		wantFeedback  *uuid.UUID
	}{
		"spring dead-letter topic": {
			headers:      hs("kafka_dlt-original-topic", "orders.events.v1", "kafka_dlt-exception-message", "NPE at Foo"),
			wantOriginal: "orders.events.v1", wantError: "NPE at Foo",
		},
		"spring retry topic": {
			headers: hs("kafka_original-topic", "orders.v1", "kafka_exception-message", "Listener failed",
				"kafka_exception-fqcn", "org.springframework.kafka.listener.ListenerExecutionFailedException"),
			wantOriginal: "orders.v1", wantError: "Listener failed",
		},
		"spring dlt class when the message is empty": {
			headers: hs("kafka_dlt-exception-message", "", "kafka_dlt-exception-fqcn", "java.lang.IllegalStateException"),
			mapped:  "m", wantOriginal: "m", wantError: "java.lang.IllegalStateException",
		},
		"spring retry class when there is no message": {
			headers: hs("kafka_exception-fqcn", "java.lang.NullPointerException"),
			mapped:  "m", wantOriginal: "m", wantError: "java.lang.NullPointerException",
		},
		"spring key deserialisation": {
			headers: hs("kafka_dlt-key-exception-message", "Can't deserialize key", "kafka_dlt-key-exception-fqcn", "K"),
			mapped:  "m", wantOriginal: "m", wantError: "Can't deserialize key",
		},
		"spring key deserialisation, retry topic": {
			headers: hs("kafka_key-exception-message", "bad key bytes"), mapped: "m", wantOriginal: "m", wantError: "bad key bytes",
		},
		"spring key class only": {
			headers: hs("kafka_key-exception-fqcn", "org.KeyError"), mapped: "m", wantOriginal: "m", wantError: "org.KeyError",
		},
		"connect": {
			headers:      hs("__connect.errors.topic", "payments", "__connect.errors.exception.message", "bad record"),
			wantOriginal: "payments", wantError: "bad record",
		},
		"connect appends: the last message wins": {
			headers: hs("__connect.errors.topic", "payments", "__connect.errors.exception.message", "first",
				"__connect.errors.exception.class.name", "org.First", "__connect.errors.topic", "payments.v2",
				"__connect.errors.exception.message", "second", "__connect.errors.exception.class.name", "org.Second"),
			wantOriginal: "payments.v2", wantError: "second",
		},
		"connect: the last message is empty, its class wins over an older message": {
			headers: hs("__connect.errors.exception.message", "old", "__connect.errors.exception.class.name", "org.Old",
				"__connect.errors.exception.message", "", "__connect.errors.exception.class.name", "org.New"),
			mapped: "m", wantOriginal: "m", wantError: "org.New",
		},
		"connect class only": {
			headers: hs("__connect.errors.exception.class.name", "org.apache.kafka.connect.errors.DataException"),
			mapped:  "m", wantOriginal: "m", wantError: "org.apache.kafka.connect.errors.DataException",
		},
		"plain convention": {
			headers:      hs("original_topic", "users.events.v1", "error", "boom"),
			wantOriginal: "users.events.v1", wantError: "boom",
		},
		"error header wins over spring": {
			headers: hs("kafka_dlt-exception-message", "spring", "error", "explicit"),
			mapped:  "x.events.v1", wantOriginal: "x.events.v1", wantError: "explicit",
		},
		"spring dead-letter topic header wins over the retry topic one": {
			headers: hs("kafka_original-topic", "retry", "kafka_dlt-original-topic", "dlt"), mapped: "m", wantOriginal: "dlt", wantError: UnknownError,
		},
		"mapping when no header": {
			headers: nil, mapped: "orders.events.v1", wantOriginal: "orders.events.v1", wantError: UnknownError,
		},
		"no original topic when nothing names one": {
			headers: nil, wantOriginal: "", wantLastError: "no original topic: the source names none for orders.dlq.v1",
			wantError: UnknownError,
		},
		"a header naming the DLQ topic itself is no original topic": {
			headers: hs("original_topic", "orders.dlq.v1"), mapped: "m", wantOriginal: "",
			wantLastError: "no original topic: the header original_topic names the DLQ topic itself", wantError: UnknownError,
		},
		"a mapping to the DLQ topic itself is none": {
			mapped: "orders.dlq.v1", wantOriginal: "", wantLastError: "no original topic: the source's topic mapping names the DLQ topic itself",
			wantError: UnknownError,
		},
		"another dead-letter topic is no original topic": {
			headers: hs("kafka_dlt-original-topic", "billing.dlq.v1"), wantOriginal: "",
			wantLastError: "no original topic: the header kafka_dlt-original-topic names billing.dlq.v1, a dead-letter topic", wantError: UnknownError,
		},
		"feedback id": {
			headers: hs("x-dlq-id", id.String(), "error", "again"),
			mapped:  "o", wantOriginal: "o", wantError: "again", wantFeedback: &id,
		},
		"bad feedback id ignored": {
			headers: hs("x-dlq-id", "not-a-uuid"), mapped: "o", wantOriginal: "o", wantError: UnknownError,
		},
		"nul and invalid utf8 sanitised": {
			headers:      hs("original_topic", "a\x00b", "error", "e\xff\x00"),
			wantOriginal: "ab", wantError: "e\uFFFD",
		},
		"empty header values skipped": {
			headers:      hs("kafka_dlt-original-topic", "", "original_topic", "z", "error", "   "),
			wantOriginal: "z", wantError: UnknownError,
		},
		"header keys that are not UTF-8 are kept and ignored": {
			headers: hs("bad\xffkey", "v", "error\xff", "not the error header"), mapped: "m", wantOriginal: "m", wantError: UnknownError,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := interpretKafka(sdk.DeadLetter{
				Position: sdk.LogPosition("orders.dlq.v1", 2, 7), Headers: tc.headers, Value: []byte("{}"),
				Timestamp: time.Unix(1700000000, 0),
			}, tc.mapped, time.Now(), func(topic string) bool { return topic == "billing.dlq.v1" })
			require.Equal(t, tc.wantOriginal, in.OriginalTopic)
			require.Equal(t, tc.wantLastError, in.LastError)
			require.Equal(t, tc.wantError, in.ErrorMessage)
			require.Equal(t, tc.wantFeedback, in.FeedbackOf)
			require.Equal(t, LogPosition("kafka", "orders.dlq.v1", 2, 7), in.Position)
			require.Len(t, in.Headers, len(tc.headers), "headers kept as received")
			for i, h := range tc.headers {
				require.Equal(t, h.Key, in.Headers[i].Key)
				require.Equal(t, h.Value, in.Headers[i].Value)
			}
		})
	}
}

// A producer timestamp no database column can hold (year 300000, or before
// 1970) is not kept; it once stopped a whole intake on PostgreSQL.
// A source's topic name is its identity: trimming it merged the queues
// "orders " and "orders" (found by an outside review).
func TestInterpretKeepsTheSourcesTopicNameAsItIs(t *testing.T) {
	for in, want := range map[string]string{
		"orders ":                "orders ",
		" orders":                " orders",
		"orders":                 "orders",
		"orders:dlq":             "orders:dlq",
		"a\x00b":                 "ab",
		"caf\xe9":                "caf\uFFFD",
		strings.Repeat("é", 200): strings.Repeat("é", 127),
	} {
		got := interpretKafkaNoMap(sdk.DeadLetter{Position: sdk.LogPosition(in, 0, 0), Value: []byte("x")}, time.Now(), nil)
		require.Equal(t, want, got.Position.Topic, "%q", in)
	}
}

func TestInterpretDropsTimestampsOutOfRange(t *testing.T) {
	for _, ts := range []time.Time{time.UnixMilli(9_000_000_000_000_000), time.UnixMilli(-86_400_000), time.Time{}, time.Unix(0, 0)} {
		in := interpretKafkaNoMap(sdk.DeadLetter{Position: sdk.LogPosition("t", 0, 0), Timestamp: ts}, time.Now(), nil)
		require.Nil(t, in.ProducedAt, "%v", ts)
	}
	ok := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	in := interpretKafkaNoMap(sdk.DeadLetter{Position: sdk.LogPosition("t", 0, 0), Timestamp: ok}, time.Now(), nil)
	require.Equal(t, ok, *in.ProducedAt)
}

func TestInterpretKeepsATruncatedMessageAsDeadWithTheReason(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	id := uuid.New()
	in := interpretKafkaNoMap(sdk.DeadLetter{Position: sdk.LogPosition("t.dlq.v1", 0, 0), Headers: hs("error", "boom", "x-dlq-id", id.String()),
		Truncated: true, OriginalSize: 70 << 20}, now, nil)
	require.Nil(t, in.Payload, "nothing to keep")
	require.True(t, in.Dead)
	require.Equal(t, "boom", in.ErrorMessage, "the consumer's error stays")
	require.Contains(t, in.LastError, "73400320 bytes")
	require.Contains(t, in.LastError, "max_message_bytes")
	require.Nil(t, in.FeedbackOf, "never an update of another record")
	require.True(t, in.Truncated)
	require.Equal(t, &Attempt{At: now, Outcome: OutcomeTruncated, Error: in.LastError}, in.Attempt)
}

// A null value stays null (a tombstone), an empty one empty: neither is
// truncated.
func TestInterpretKeepsNullApartFromEmpty(t *testing.T) {
	null := interpretKafkaNoMap(sdk.DeadLetter{Position: sdk.LogPosition("t.dlq.v1", 0, 0), Headers: []sdk.Header{{Key: []byte("h")}}}, time.Now(), nil)
	require.Nil(t, null.Payload)
	require.Nil(t, null.Headers[0].Value)
	require.False(t, null.Truncated)
	empty := interpretKafkaNoMap(sdk.DeadLetter{Position: sdk.LogPosition("t.dlq.v1", 0, 0), Value: []byte{},
		Headers: []sdk.Header{{Key: []byte("h"), Value: []byte{}}}}, time.Now(), nil)
	require.NotNil(t, empty.Payload)
	require.NotNil(t, empty.Headers[0].Value)
	require.False(t, empty.Truncated)
}

// A returning replay says which attempt failed again (x-dlq-retry-count,
// the last one when repeated); anything but a positive number says nothing.
func TestInterpretReadsTheAttemptOfAReturn(t *testing.T) {
	id := uuid.New()
	for value, want := range map[string]int{"1": 1, " 3 ": 3, "0": 0, "-2": 0, "x": 0, "": 0} {
		in := interpretKafkaNoMap(sdk.DeadLetter{Position: sdk.LogPosition("t.dlq.v1", 0, 0), Value: []byte("{}"),
			Headers: hs("x-dlq-retry-count", "9", "x-dlq-id", id.String(), "x-dlq-retry-count", value)}, time.Now(), nil)
		require.Equal(t, want, in.FeedbackAttempt, "%q", value)
	}
	in := interpretKafkaNoMap(sdk.DeadLetter{Position: sdk.LogPosition("t.dlq.v1", 0, 0), Value: []byte("{}"),
		Headers: hs("x-dlq-retry-count", "2")}, time.Now(), nil)
	require.Zero(t, in.FeedbackAttempt, "without x-dlq-id it is no return")
}

func TestRepublishHeadersReplaceEarlierDLQHeaders(t *testing.T) {
	id := uuid.New()
	m := &Message{ID: id, RetryCount: 1, Headers: []Header{{Key: []byte("trace"), Value: []byte("t1")}, {Key: []byte("x-dlq-id"), Value: []byte("old")}, {Key: []byte("X-DLQ-Retry-Count"), Value: []byte("9")}}}
	hs := RepublishHeaders(m)
	require.Equal(t, []sdk.Header{{Key: []byte("trace"), Value: []byte("t1")}, {Key: []byte("x-dlq-id"), Value: []byte(id.String())}, {Key: []byte("x-dlq-retry-count"), Value: []byte("2")}}, hs)
}

func TestValidTopic(t *testing.T) {
	max := strings.Repeat("é", MaxTopicLength/2) + "a" // 255 bytes
	for _, ok := range []string{"orders.dlq.v1", "a", "A_b-c.9", "orders:dlq", "orders/order.created", "a b", "a%2Fb", "ä", "failed_jobs", "public.failed_jobs", "...", max} {
		require.NoError(t, ValidTopic(ok), ok)
	}
	for _, bad := range []string{"", ".", "..", max + "a", "a\x00b", "a\nb", "a\u0085b", "\xff", strings.Repeat("a", 300),
		"a//b", "orders/", "/orders", "x/.", "a/../b", "../a"} {
		require.ErrorIs(t, ValidTopic(bad), derrors.ErrInvalid, "%q", bad)
	}
}

// FuzzHeaders feeds Interpret arbitrary headers (keys and values of any
// bytes, any number, duplicates), keys, values and timestamps: it must never
// fail, keep every header and the key byte for byte, produce text the state
// stores accept, and keep the message fit for the JSON the admin API renders (adminapi tests that every byte comes back).
func FuzzHeaders(f *testing.F) {
	f.Add([]byte("kafka_dlt-original-topic\x00orders.events.v1\x00error\x00boom"), []byte("k"), []byte(`{"a":1}`), int64(1700000000000))
	f.Add([]byte("x-dlq-id\x00550e8400-e29b-41d4-a716-446655440000\x00__connect.errors.topic\x00\xff"), []byte(nil), []byte{0}, int64(-1))
	f.Add([]byte("bad\xffkey\x00v\xfe\x00__connect.errors.exception.message\x00\x00__connect.errors.exception.class.name\x00C"), []byte{0xff}, []byte{}, int64(9_000_000_000_000_000))
	f.Fuzz(checkHeaders)
}

// checkHeaders is one run of FuzzHeaders.
func checkHeaders(t *testing.T, raw, key, payload []byte, ts int64) {
	if len(raw)+len(key)+len(payload) > 1<<20 {
		return // larger than a Kafka message by default; only slows the fuzzer down
	}
	{
		// raw holds key\0value\0key\0value...; a trailing key has an empty value.
		var headers []sdk.Header
		parts := bytes.Split(raw, []byte{0})
		for i := 0; i < len(parts); i += 2 {
			h := sdk.Header{Key: parts[i]}
			if i+1 < len(parts) {
				h.Value = parts[i+1]
			}
			headers = append(headers, h)
		}
		d := sdk.DeadLetter{Position: sdk.LogPosition("t.dlq.v1", 0, 0), Key: key, Headers: headers, Value: payload,
			Timestamp: time.UnixMilli(ts)}
		in := interpretKafkaNoMap(d, time.Now(), nil)
		for _, s := range []string{in.OriginalTopic, in.ErrorMessage, in.LastError} {
			if len(s) > maxErrorLength || !utf8Valid(s) || containsNUL(s) {
				t.Fatalf("unsafe text %q", s)
			}
		}
		if in.ErrorMessage == "" || (in.OriginalTopic == "") == (in.LastError == "") && !d.Truncated {
			t.Fatalf("no error, or an original topic and a reason it has none: %+v", in)
		}
		if in.OriginalTopic == "t.dlq.v1" {
			t.Fatalf("the DLQ topic as its own original topic")
		}
		if !bytes.Equal(in.Digest, Digest(d, sdk.Protocol2Traits)) || len(in.Digest) != 32 {
			t.Fatalf("digest %x", in.Digest)
		}
		if len(in.OriginalTopic) > maxTopicLength {
			t.Fatalf("original topic too long: %d", len(in.OriginalTopic))
		}
		if in.ProducedAt != nil && (in.ProducedAt.Year() < 1970 || in.ProducedAt.Year() > 9999) {
			t.Fatalf("timestamp %v kept", in.ProducedAt)
		}
		if !bytes.Equal(in.Key, key) || (key == nil) != (in.Key == nil) || !bytes.Equal(in.Payload, payload) || in.Payload == nil {
			t.Fatalf("key or payload changed")
		}
		if len(in.Headers) != len(headers) {
			t.Fatalf("%d headers kept of %d", len(in.Headers), len(headers))
		}
	}
}

// The digest tells apart what was read at a position: any change of key,
// header, value or timestamp changes it; a missing key is not an empty one.
func TestDigestIdentifiesWhatWasRead(t *testing.T) {
	base := sdk.DeadLetter{Position: sdk.LogPosition("t", 0, 1), Key: []byte("k"), Headers: hs("a", "1", "b", "2"),
		Value: []byte("v"), Timestamp: time.UnixMilli(1700000000123)}
	kafka := sdk.Protocol2Traits
	same := base
	same.Position, same.Origin = sdk.LogPosition("t", 0, 99), sdk.Origin{Destination: "mapped", DestinationConfigured: true}
	same.Redelivered = true
	require.Equal(t, Digest(base, kafka), Digest(same, kafka), "where it was read, the source's reading of it and the delivery are not content")
	variants := map[string]func(d *sdk.DeadLetter){
		"no key":           func(d *sdk.DeadLetter) { d.Key = nil },
		"empty key":        func(d *sdk.DeadLetter) { d.Key = []byte{} },
		"value":            func(d *sdk.DeadLetter) { d.Value = []byte("w") },
		"timestamp":        func(d *sdk.DeadLetter) { d.Timestamp = d.Timestamp.Add(time.Millisecond) },
		"header value":     func(d *sdk.DeadLetter) { d.Headers = hs("a", "1", "b", "3") },
		"header order":     func(d *sdk.DeadLetter) { d.Headers = hs("b", "2", "a", "1") },
		"one header fewer": func(d *sdk.DeadLetter) { d.Headers = hs("a", "1") },
		"bytes moved between fields": func(d *sdk.DeadLetter) {
			d.Headers = hs("a", "1", "b", "2v")
			d.Value = []byte{}
		},
	}
	seen := map[string]string{string(Digest(base, kafka)): "base"}
	for name, change := range variants {
		d := base
		change(&d)
		got := string(Digest(d, kafka))
		prev, dup := seen[got]
		require.False(t, dup, "%s has the digest of %s", name, prev)
		seen[got] = name
	}
}

// A source whose headers are a map (AMQP tables) may hand them over in any
// order: its digest does not depend on it, while their types and values
// still count. Untyped headers digest as they did before types existed, so
// that a redelivery of a message stored before is still recognised.
func TestDigestOfUnorderedAndTypedHeaders(t *testing.T) {
	amqp := sdk.SourceTraits{Acks: sdk.AcksPerMessage, Positions: sdk.PositionsPerDelivery, TypedHeaders: true}
	base := sdk.DeadLetter{Position: sdk.Position{Topic: "q", ID: []byte{1}}, Value: []byte("v"),
		Headers: []sdk.Header{{Key: []byte("a"), Value: []byte("1"), Type: "int"}, {Key: []byte("b"), Value: []byte("x")}}}
	swapped := base
	swapped.Headers = []sdk.Header{base.Headers[1], base.Headers[0]}
	require.Equal(t, Digest(base, amqp), Digest(swapped, amqp), "header order is not content of a map")
	require.NotEqual(t, Digest(base, sdk.Protocol2Traits), Digest(swapped, sdk.Protocol2Traits), "it is of a list")

	retyped := base
	retyped.Headers = []sdk.Header{{Key: []byte("a"), Value: []byte("1"), Type: "long"}, base.Headers[1]}
	require.NotEqual(t, Digest(base, amqp), Digest(retyped, amqp), "an int 1 is not a long 1")

	untyped := sdk.DeadLetter{Value: []byte("v"), Headers: hs("a", "1"), Timestamp: time.UnixMilli(5)}
	require.Equal(t, "328805e5637b9de2c98266696d2565d975584768fe1384dc49cb82a3dd2c37f9",
		hex.EncodeToString(Digest(untyped, sdk.Protocol2Traits)), "the digest protocol 2 rows were stored with")

	none := base
	none.Timestamp = time.Time{}
	epoch := base
	epoch.Timestamp = time.UnixMilli(0)
	require.Equal(t, Digest(none, amqp), Digest(epoch, amqp), "no timestamp digests as protocol 2 sent it: the epoch")
}
