package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

// headerJSON is a header as the admin API shows it: text when the bytes are
// valid UTF-8, else null with the bytes in *_base64.
type headerJSON struct {
	Key         *string `json:"key"`
	KeyBase64   *string `json:"key_base64"`
	Value       *string `json:"value"`
	ValueBase64 *string `json:"value_base64"`
}

type attemptJSON struct {
	At      string `json:"at"`
	Outcome string `json:"outcome"`
	Error   string `json:"error"`
	Trigger string `json:"trigger"`
	UID     *int64 `json:"uid"`
}

// messageJSON is the whole message JSON of the admin API.
type messageJSON struct {
	ID            string          `json:"id"`
	Topic         string          `json:"topic"`
	OriginalTopic string          `json:"original_topic"`
	ErrorMessage  string          `json:"error_message"`
	RetryCount    int             `json:"retry_count"`
	MaxRetries    int             `json:"max_retries"`
	Status        string          `json:"status"`
	Source        string          `json:"source"`
	Position      string          `json:"position"`
	PositionID    string          `json:"position_id"`
	CreatedAt     string          `json:"created_at"`
	UpdatedAt     string          `json:"updated_at"`
	LastRetryAt   *string         `json:"last_retry_at"`
	Payload       json.RawMessage `json:"payload"`
	PayloadBase64 *string         `json:"payload_base64"`
	Key           *string         `json:"key"`
	KeyBase64     *string         `json:"key_base64"`
	Headers       []headerJSON    `json:"headers"`
	LastError     *string         `json:"last_error"`
	Attempts      []attemptJSON   `json:"attempts"`
}

// textOrBase64 turns a text/base64 pair back into the bytes it shows.
func textOrBase64(t *testing.T, text, b64 *string) []byte {
	t.Helper()
	switch {
	case b64 != nil:
		b, err := base64.StdEncoding.DecodeString(*b64)
		require.NoError(t, err)
		return b
	case text != nil:
		return []byte(*text)
	default:
		return nil
	}
}

func (m messageJSON) key(t *testing.T) []byte { return textOrBase64(t, m.Key, m.KeyBase64) }

type rawHeader struct{ key, value []byte }

func (m messageJSON) headers(t *testing.T) []rawHeader {
	out := make([]rawHeader, len(m.Headers))
	for i, h := range m.Headers {
		out[i] = rawHeader{textOrBase64(t, h.Key, h.KeyBase64), textOrBase64(t, h.Value, h.ValueBase64)}
	}
	return out
}

func getMessage(t *testing.T, d *testsvc.Daemon, id string) messageJSON {
	t.Helper()
	var m messageJSON
	apitest.Expect(t, d, 200, &m).Message(t.Context(), id)
	return m
}

// allMessages pages through every message of a topic.
func allMessages(t *testing.T, d *testsvc.Daemon, topic string) []messageJSON {
	t.Helper()
	return listAll[messageJSON](t, d, topic)
}

// listAll pages through a topic's messages, each decoded as a T.
func listAll[T any](t *testing.T, d *testsvc.Daemon, topic string) []T {
	t.Helper()
	var out []T
	for page := 1; ; page++ {
		var b struct {
			Messages   []T `json:"messages"`
			Pagination struct {
				HasNext bool `json:"has_next"`
			} `json:"pagination"`
		}
		apitest.Expect(t, d, 200, &b).ListMessages(t.Context(), topic, url.Values{"page": {strconv.Itoa(page)}, "page_size": {"1000"}})
		out = append(out, b.Messages...)
		if !b.Pagination.HasNext {
			return out
		}
	}
}

func byOffset(msgs []messageJSON) map[int64]messageJSON {
	out := map[int64]messageJSON{}
	for _, m := range msgs {
		out[offsetOf(m.PositionID)] = m
	}
	return out
}

// createTopic creates a topic with configs (max.message.bytes, ...).
func createTopic(t *testing.T, k *testsvc.KafkaBroker, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	cfg := map[string]*string{}
	for name, v := range configs {
		cfg[name] = &v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(k.Client(t)).CreateTopic(ctx, partitions, 1, cfg, topic)
	require.NoError(t, err)
	require.NoError(t, resp.Err)
}

// produceSync writes records with franz-go in batches the broker's default
// 1 MB limit accepts, and fails the test on any error.
func produceSync(t *testing.T, k *testsvc.KafkaBroker, recs ...*kgo.Record) {
	t.Helper()
	produceSyncBatch(t, k, 1_000_000, recs...)
}

// produceSyncBatch is produceSync with record batches of up to batchBytes,
// for topics with a larger max.message.bytes.
func produceSyncBatch(t *testing.T, k *testsvc.KafkaBroker, batchBytes int32, recs ...*kgo.Record) {
	t.Helper()
	c := k.Client(t, kgo.ProducerBatchMaxBytes(batchBytes), kgo.MaxBufferedRecords(100000), kgo.ProducerLinger(0))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, c.ProduceSync(ctx, recs...).FirstErr())
}

// consumeRecords reads n records of a topic from the start with franz-go.
func consumeRecords(t *testing.T, k *testsvc.KafkaBroker, topic string, n int) []*kgo.Record {
	t.Helper()
	c := k.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(64<<20))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n && ctx.Err() == nil {
		c.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	if len(out) != n {
		per := map[int32]int{}
		last := map[int32]int64{}
		for _, r := range out {
			per[r.Partition]++
			last[r.Partition] = max(last[r.Partition], r.Offset)
		}
		ends, err := kadm.NewClient(k.Client(t)).ListEndOffsets(testsvc.Context(t, time.Minute), topic)
		require.NoError(t, err)
		ends.Each(func(o kadm.ListedOffset) {
			t.Logf("partition %d: end offset %d, consumed %d, last consumed %d", o.Partition, o.Offset, per[o.Partition], last[o.Partition])
		})
	}
	require.Equal(t, n, len(out), "records on %s", topic)
	return out
}

// withoutDLQHeaders drops the x-dlq-* headers a republish adds.
func withoutDLQHeaders(hs []kgo.RecordHeader) []rawHeader {
	var out []rawHeader
	for _, h := range hs {
		if strings.HasPrefix(h.Key, "x-dlq-") {
			continue
		}
		out = append(out, rawHeader{[]byte(h.Key), h.Value})
	}
	return out
}

// sourceBlock is kafkaSource with a chosen consumer group.
func sourceBlock(addr, group string) string {
	return strings.Replace(kafkaSource(addr), `group_id = "lifecycled-e2e"`, fmt.Sprintf("group_id = %q", group), 1)
}

// setGroup rewrites the consumer group in a daemon's config file.
func setGroup(t *testing.T, d *testsvc.Daemon, from, to string) {
	t.Helper()
	b, err := os.ReadFile(d.ConfigPath)
	require.NoError(t, err)
	s := strings.Replace(string(b), fmt.Sprintf("group_id = %q", from), fmt.Sprintf("group_id = %q", to), 1)
	require.NotEqual(t, string(b), s, "group_id %q in the config", from)
	require.NoError(t, os.WriteFile(d.ConfigPath, []byte(s), 0o600))
}

func startDLQDaemon(t *testing.T, state string, extra string) *testsvc.Daemon {
	t.Helper()
	o := testsvc.DaemonOptions{Extra: extra}
	if state == "postgres" {
		o.State = testsvc.PGDatabase(t)
	}
	d := testsvc.StartDaemon(t, o)
	testsvc.Eventually(t, 30*time.Second, apitest.Ready(d), "ready")
	return d
}

// partitionOf and offsetOf read a Kafka message's position (a log position,
// sdk.LogPosition) from the API's position_id; -1 when it is not one.
func partitionOf(positionID string) int32 {
	p, _ := logPositionOf(positionID)
	return p
}

func offsetOf(positionID string) int64 {
	_, o := logPositionOf(positionID)
	return o
}

func logPositionOf(positionID string) (int32, int64) {
	id, err := base64.StdEncoding.DecodeString(positionID)
	if err != nil {
		return -1, -1
	}
	p, o, ok := sdk.ParseLogPosition(id)
	if !ok {
		return -1, -1
	}
	return p, o
}
