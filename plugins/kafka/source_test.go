package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest"
)

// fixture produces and consumes with franz-go clients of its own, as a
// producer or consumer of the DLQ topics would.
type fixture struct {
	addr string
	c    *kgo.Client
}

func newFixture(t testing.TB, addr string) *fixture {
	c, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation())
	require.NoError(t, err)
	t.Cleanup(c.Close)
	adm := kadm.NewClient(c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = adm.CreateTopics(ctx, 3, 1, nil, "orders.dlq.v1", "orders.events.v1")
	require.NoError(t, err)
	return &fixture{addr: addr, c: c}
}

func (f *fixture) Config(testing.TB) map[string]any {
	return map[string]any{"brokers": []any{f.addr}, "group_id": "conformance", "refresh_interval": "1s", "session_timeout": "2s"}
}
func (f *fixture) DLQTopic() string       { return "orders.dlq.v1" }
func (f *fixture) RepublishTopic() string { return "orders.events.v1" }

func (f *fixture) Produce(t testing.TB, msgs []plugintest.Produced) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for _, m := range msgs {
		r := &kgo.Record{Topic: f.DLQTopic(), Key: m.Key, Value: m.Value}
		for _, h := range m.Headers {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: string(h.Key), Value: h.Value})
		}
		recs = append(recs, r)
	}
	require.NoError(t, f.c.ProduceSync(ctx, recs...).FirstErr())
}

func (f *fixture) Consume(t testing.TB, topic string, n int) []plugintest.Produced {
	c, err := kgo.NewClient(kgo.SeedBrokers(f.addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer c.Close()
	var out []plugintest.Produced
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(out) < n && ctx.Err() == nil {
		fetches := c.PollFetches(ctx)
		fetches.EachRecord(func(r *kgo.Record) {
			p := plugintest.Produced{Key: r.Key, Value: r.Value}
			for _, h := range r.Headers {
				p.Headers = append(p.Headers, sdk.Header{Key: []byte(h.Key), Value: h.Value})
			}
			out = append(out, p)
		})
	}
	return out
}

func binary(t testing.TB) string { return testsvc.Binary(t, "lifecycled-plugin-kafka") }

func TestConformance(t *testing.T) {
	t.Parallel()
	broker := testsvc.Kafka(t, 3)
	plugintest.RunDLQSource(t, plugintest.SourceOptions{
		Binary:  binary(t),
		Fixture: newFixture(t, broker.Addr),
		BadConfigs: map[string]map[string]any{
			"no brokers":       {"topic_pattern": "*.dlq.v1"},
			"bad broker":       {"brokers": []any{"no-port"}},
			"bad pattern":      {"brokers": []any{broker.Addr}, "topic_pattern": "[unclosed"},
			"bad start offset": {"brokers": []any{broker.Addr}, "start_offset": "middle"},
			"bad sasl":         {"brokers": []any{broker.Addr}, "sasl": map[string]any{"mechanism": "kerberos", "username": "u"}},
			"unknown key":      {"brokers": []any{broker.Addr}, "group": "x"},
		},
	})
}

func TestNewTopicsArePickedUpAndMapped(t *testing.T) {
	t.Parallel()
	broker := testsvc.Kafka(t, 1)
	f := newFixture(t, broker.Addr)
	p := plugintest.Launch(t, binary(t), sdk.KindDLQSource)
	s := p.Source(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := f.Config(t)
	cfg["original_topics"] = map[string]any{"legacy-dead-letters": "legacy"}
	cfg["topic_pattern"] = "*"
	_, err := s.Configure(ctx, &sdk.ConfigureRequest{Name: "kafka", Config: cfg})
	require.NoError(t, err)

	// A topic created after the plugin started is consumed too.
	rec := &kgo.Record{Topic: "payments.dlq.v1", Value: []byte("{}")}
	require.NoError(t, f.c.ProduceSync(ctx, rec, &kgo.Record{Topic: "legacy-dead-letters", Value: []byte("x")}).FirstErr())
	got := map[string]string{}
	deadline := time.Now().Add(time.Minute)
	for len(got) < 2 && time.Now().Before(deadline) {
		resp, err := s.Fetch(ctx, &sdk.FetchRequest{Max: 10, Wait: time.Second})
		require.NoError(t, err)
		for _, m := range resp.Messages {
			got[m.Position.Topic] = m.Origin.Destination
		}
	}
	require.Equal(t, "payments.events.v1", got["payments.dlq.v1"], "default mapping <name>.dlq.v1 -> <name>.events.v1")
	require.Equal(t, "legacy", got["legacy-dead-letters"], "explicit mapping")
}

func TestBrokerDownRepublishIsRetryable(t *testing.T) {
	t.Parallel()
	broker := testsvc.Kafka(t, 1)
	f := newFixture(t, broker.Addr)
	p := plugintest.Launch(t, binary(t), sdk.KindDLQSource)
	s := p.Source(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := s.Configure(ctx, &sdk.ConfigureRequest{Name: "kafka", Config: f.Config(t)})
	require.NoError(t, err)
	broker.Stop()
	_, err = s.Republish(ctx, &sdk.RepublishRequest{Messages: []sdk.RepublishMessage{{ID: "1", Topic: "orders.events.v1", Value: []byte("x")}}})
	if err == nil {
		t.Fatal("republish to a stopped broker succeeded")
	}
	require.Equal(t, sdk.ClassRetryable, sdk.ClassOf(err), "%v", err)
}

// The case: a header key that is not UTF-8 at offset 2 of five. With
// protocol 1 the whole fetch failed in gRPC marshalling after the reader had
// moved past all five.
func TestFetchCarriesHeaderKeysAsBytes(t *testing.T) {
	t.Parallel()
	broker := testsvc.Kafka(t, 1)
	broker.CreateTopics(t, 1, "bytes.dlq.v1")
	for i := 0; i < 5; i++ {
		args := []string{"-P", "-t", "bytes.dlq.v1", "-H", "error=e"}
		if i == 2 {
			args = append(args, "-H", "bad\xffkey=v\xfe")
		}
		broker.Kcat(t, fmt.Sprintf("m%d\n", i), args...)
	}
	s := configured(t, broker.Addr, nil)
	ctx := testsvc.Context(t, time.Minute)
	var got []sdk.DeadLetter
	for deadline := time.Now().Add(30 * time.Second); len(got) < 5 && time.Now().Before(deadline); {
		resp, err := s.Fetch(ctx, &sdk.FetchRequest{Max: 10, Wait: time.Second})
		require.NoError(t, err)
		got = append(got, resp.Messages...)
	}
	require.Len(t, got, 5)
	for i, m := range got {
		_, offset, ok := sdk.ParseLogPosition(m.Position.ID)
		require.True(t, ok, "a log position")
		require.EqualValues(t, i, offset)
		require.Equal(t, []byte(fmt.Sprintf("m%d", i)), m.Value)
	}
	require.Equal(t, []sdk.Header{{Key: []byte("error"), Value: []byte("e")}, {Key: []byte("bad\xffkey"), Value: []byte("v\xfe")}}, got[2].Headers)
}
