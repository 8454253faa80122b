package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// produced is what a test wrote at one position.
type produced struct {
	key     []byte // nil: no key
	value   []byte
	headers []rawHeader
}

type position struct {
	partition int32
	offset    int64
}

// arbitrary makes dead letters out of random bytes: keys that are absent,
// empty or binary, values that are empty, binary or large, and any number of
// headers with arbitrary keys and values (duplicates included).
type arbitrary struct {
	rng *rand.Rand
}

func (a arbitrary) bytes(max int, exclude ...byte) []byte {
	n := a.rng.IntN(max + 1)
	b := make([]byte, n)
	for i := range b {
		for {
			b[i] = byte(a.rng.UintN(256))
			if !bytes.Contains(exclude, b[i:i+1]) {
				break
			}
		}
	}
	return b
}

func (a arbitrary) value() []byte {
	switch n := a.rng.IntN(100); {
	case n < 10:
		return []byte{}
	case n < 11:
		return bytes.Repeat(a.bytes(64), 1+(900<<10)/65) // about 900 KB
	case n < 20:
		return []byte(fmt.Sprintf(`{"n":%d,"s":"\u0000 \ud800 x"}`, a.rng.IntN(1000))) // JSON PostgreSQL's jsonb refuses
	case n < 30:
		return []byte(fmt.Sprintf(`{"order_id": %d}`, a.rng.IntN(1000)))
	default:
		return a.bytes(2000)
	}
}

// timestamp returns producer timestamps, including ones no database column
// holds (year 300000) and ones before 1970.
func (a arbitrary) timestamp() time.Time {
	switch a.rng.IntN(8) {
	case 0:
		return time.UnixMilli(9_000_000_000_000_000)
	case 1:
		return time.UnixMilli(-86_400_000)
	case 2:
		return time.UnixMilli(1)
	default:
		return time.Now()
	}
}

func (a arbitrary) goRecord(topic string) (*kgo.Record, produced) {
	r := &kgo.Record{Topic: topic, Value: a.value(), Timestamp: a.timestamp()}
	p := produced{value: r.Value}
	switch a.rng.IntN(3) {
	case 0:
	case 1:
		r.Key = []byte{}
	default:
		r.Key = a.bytes(40)
	}
	p.key = r.Key
	for i := a.rng.IntN(6); i > 0; i-- {
		h := kgo.RecordHeader{Key: string(a.bytes(20)), Value: a.bytes(100)}
		if a.rng.IntN(4) == 0 {
			h.Key = "error" // duplicates of a header we interpret
		}
		r.Headers = append(r.Headers, h)
		p.headers = append(p.headers, rawHeader{[]byte(h.Key), h.Value})
	}
	return r, p
}

// kcatRecord writes one message with kcat: the value comes from a file (any
// bytes), key and headers from argv (no NUL there, and no '=' in a header key).
func (a arbitrary) kcatRecord(t *testing.T, k *testsvc.KafkaBroker, dir, topic string, i int) produced {
	p := produced{value: a.value()}
	if len(p.value) > 800<<10 {
		p.value = p.value[:800<<10] // librdkafka's default message.max.bytes is 1000000
	}
	if len(p.value) == 0 {
		p.value = []byte{0} // kcat sends nothing for an empty file; the Go client covers empty values
	}
	file := filepath.Join(dir, fmt.Sprintf("v%d", i))
	require.NoError(t, os.WriteFile(file, p.value, 0o600))
	args := []string{"-P", "-t", topic}
	if a.rng.IntN(2) == 0 {
		p.key = append([]byte("k"), a.bytes(30, 0)...)
		args = append(args, "-k", string(p.key))
	}
	for j := a.rng.IntN(4); j > 0; j-- {
		h := rawHeader{append([]byte("h"), a.bytes(15, 0, '=')...), a.bytes(60, 0)}
		args = append(args, "-H", string(h.key)+"="+string(h.value))
		p.headers = append(p.headers, h)
	}
	k.Kcat(t, "", append(args, file)...)
	return p
}

// Every offset produced, whatever its bytes, is stored exactly once and shown
// so that the bytes can be recovered, across a kill -9 of the daemon.
func TestArbitraryDeadLettersAreStoredExactlyOnceAcrossARestart(t *testing.T) {
	t.Parallel()
	for _, state := range []string{"sqlite", "postgres"} {
		t.Run(state, func(t *testing.T) {
			seed := uint64(time.Now().UnixNano())
			t.Logf("seed %d", seed)
			a := arbitrary{rng: rand.New(rand.NewPCG(seed, seed))}
			k := testsvc.Kafka(t, 3)
			createTopic(t, k, "fuzz.dlq.v1", 3, map[string]string{"max.message.bytes": "8388608"})
			k.CreateTopics(t, 1, "fuzz.events.v1")

			// Records go to partitions by key; the broker tells where each landed.
			want := map[position]produced{}
			goBatch := func(n int) {
				var recs []*kgo.Record
				var ps []produced
				for i := 0; i < n; i++ {
					r, p := a.goRecord("fuzz.dlq.v1")
					recs, ps = append(recs, r), append(ps, p)
				}
				// Two values of several MB: a fetch batch larger than gRPC's default 4 MiB.
				for _, size := range []int{3 << 20, 5 << 20} {
					v := bytes.Repeat([]byte{0xff, 0}, size/2)
					recs = append(recs, &kgo.Record{Topic: "fuzz.dlq.v1", Value: v})
					ps = append(ps, produced{value: v})
				}
				produceSyncBatch(t, k, 7<<20, recs...)
				for i, r := range recs {
					want[position{r.Partition, r.Offset}] = ps[i]
				}
			}
			dir := t.TempDir()

			// Enough that the intake is still at work when the daemon is killed.
			goBatch(3000)
			kcatOut := a.kcatAll(t, k, dir, 30)
			d := startDLQDaemon(t, state, kafkaSource(k.Addr)+retryBlock(false, "1m"))
			stored := 0
			testsvc.Eventually(t, time.Minute, func() bool {
				stored = list(t, d, "fuzz.dlq.v1", "&page_size=1").Pagination.TotalCount
				return stored > 100
			}, "intake under way")
			d.Kill9()
			t.Logf("killed after %d of %d were stored", stored, len(want)+len(kcatOut))
			goBatch(100)
			d.Restarted(t)
			goBatch(100)
			kcatOut = append(kcatOut, a.kcatAll(t, k, dir, 10)...)

			// kcat does not report offsets: find them by reading the topic back.
			for pos, p := range kcatPositions(t, k, "fuzz.dlq.v1", want, kcatOut) {
				want[pos] = p
			}
			total := len(want)
			waitTotal(t, d, "fuzz.dlq.v1", total, 3*time.Minute)
			time.Sleep(3 * time.Second)
			require.Equal(t, total, list(t, d, "fuzz.dlq.v1", "&page_size=1").Pagination.TotalCount, "nothing arrives twice late")

			byPos := map[position]messageJSON{}
			for _, m := range allMessages(t, d, "fuzz.dlq.v1") {
				pos := position{partitionOf(m.PositionID), offsetOf(m.PositionID)}
				require.NotContains(t, byPos, pos, "position stored twice")
				byPos[pos] = m
			}
			require.Equal(t, total, len(byPos))
			for pos, p := range want {
				m, ok := byPos[pos]
				require.True(t, ok, "position %v not stored", pos)
				checkStored(t, pos, p, m)
			}
		})
	}
}

func checkStored(t *testing.T, pos position, p produced, m messageJSON) {
	t.Helper()
	// kafka-go reads an empty key as no key (docs/plugins.md).
	if len(p.key) == 0 {
		require.Empty(t, m.key(t), "%v: no key", pos)
	} else {
		require.Equal(t, p.key, m.key(t), "%v: key", pos)
	}
	got := m.headers(t)
	require.Len(t, got, len(p.headers), "%v: headers", pos)
	for i := range got {
		require.Equal(t, p.headers[i].key, got[i].key, "%v: header %d key", pos, i)
		require.True(t, bytes.Equal(p.headers[i].value, got[i].value), "%v: header %d value %q, want %q", pos, i, got[i].value, p.headers[i].value)
	}
	if m.PayloadBase64 != nil {
		require.Equal(t, p.value, textOrBase64(t, nil, m.PayloadBase64), "%v: payload", pos)
	} else {
		require.True(t, json.Valid(p.value), "%v: a payload shown as JSON is JSON", pos)
		require.True(t, sameJSON(t, p.value, m.Payload), "%v: payload %s, want %s", pos, m.Payload, p.value)
	}
	require.NotEmpty(t, m.ErrorMessage)
	require.NotEmpty(t, m.OriginalTopic)
}

// kcatAll writes n records with kcat and returns what it wrote.
func (a arbitrary) kcatAll(t *testing.T, k *testsvc.KafkaBroker, dir string, n int) []produced {
	out := make([]produced, n)
	for i := range out {
		out[i] = a.kcatRecord(t, k, dir, "fuzz.dlq.v1", int(a.rng.Uint32()))
	}
	return out
}

func sameRawHeaders(hs []kgo.RecordHeader, want []rawHeader) bool {
	if len(hs) != len(want) {
		return false
	}
	for i, h := range hs {
		if h.Key != string(want[i].key) || !bytes.Equal(h.Value, want[i].value) {
			return false
		}
	}
	return true
}

// kcatPositions reads the topic back and matches the records the Go client
// did not write to what kcat wrote, in order.
func kcatPositions(t *testing.T, k *testsvc.KafkaBroker, topic string, known map[position]produced, kcat []produced) map[position]produced {
	t.Helper()
	recs := consumeRecords(t, k, topic, len(known)+len(kcat))
	out := map[position]produced{}
	var unknown []*kgo.Record
	for _, r := range recs {
		if _, ok := known[position{r.Partition, r.Offset}]; !ok {
			unknown = append(unknown, r)
		}
	}
	require.Len(t, unknown, len(kcat))
	// kcat records go to partitions by key hash; within a partition they keep
	// their order, so match each partition's records in offset order against
	// the kcat records in production order.
	used := make([]bool, len(kcat))
	for _, r := range unknown {
		found := false
		for i, p := range kcat {
			if used[i] || !bytes.Equal(r.Value, p.value) || !bytes.Equal(r.Key, p.key) || !sameRawHeaders(r.Headers, p.headers) {
				continue
			}
			used[i], found = true, true
			out[position{r.Partition, r.Offset}] = p
			break
		}
		require.True(t, found, "record at %d/%d is none of kcat's (%s)", r.Partition, r.Offset, strings.ToValidUTF8(string(r.Key), "?"))
	}
	return out
}

// sameJSON compares two JSON texts as values, numbers by their exact value
// (require.JSONEq goes through float64 and fails on a 400-digit number,
// which random payloads produce; jsonb may also spell 1e2 as 100).
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	decode := func(data []byte) any {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var v any
		require.NoError(t, dec.Decode(&v))
		return v
	}
	return jsonValuesEqual(decode(a), decode(b))
}

func jsonValuesEqual(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		fx, _, errX := big.ParseFloat(string(x), 10, 4096, big.ToNearestEven)
		fy, _, errY := big.ParseFloat(string(y), 10, 4096, big.ToNearestEven)
		return errX == nil && errY == nil && fx.Cmp(fy) == 0
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || !jsonValuesEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonValuesEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	default:
		return a == b
	}
}
