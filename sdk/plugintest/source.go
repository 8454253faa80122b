package plugintest

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/lifecycled/lifecycled/sdk"
)

// Produced is a message the fixture writes to a dead-letter topic.
type Produced struct {
	Key     []byte
	Value   []byte
	Headers []sdk.Header
}

// SourceFixture drives the real broker behind a DLQSource with the broker's
// own client.
type SourceFixture interface {
	// Config is the plugin config block pointing at the test broker.
	Config(t testing.TB) map[string]any
	// DLQTopic is a dead-letter topic (queue, table) the plugin consumes,
	// empty when the kit starts.
	DLQTopic() string
	// RepublishTopic is a destination Republish may send to, in the
	// source's own notation (a Kafka topic; "exchange/routing-key"), that
	// Consume reads from.
	RepublishTopic() string
	// Produce writes messages to the DLQ topic as the broker's producers
	// (and its dead-lettering) would. Produced.Key is the message's key,
	// or what stands for one (an AMQP message id).
	Produce(t testing.TB, msgs []Produced)
	// Consume takes the next n messages sent to topic (a queue fixture
	// acknowledges what it takes; a log fixture reads from the beginning of
	// a topic only the kit writes to).
	Consume(t testing.TB, topic string, n int) []Produced
}

// SourceOptions configure RunDLQSource.
type SourceOptions struct {
	Binary     string
	Env        []string
	Fixture    SourceFixture
	BadConfigs map[string]map[string]any
	// TextHeaders: the source carries header keys and values as text only
	// (a table's columns): the kit sends no header that is not UTF-8.
	TextHeaders bool
	// RepublishValueOnly: Republish sends the value alone (an HTTP
	// reprocess call, a row into a queue table): the kit checks what
	// Consume returns by its value only.
	RepublishValueOnly bool
}

func fetchN(t testing.TB, s sdk.DLQSource, n int, within time.Duration) []sdk.DeadLetter {
	t.Helper()
	var out []sdk.DeadLetter
	deadline := time.Now().Add(within)
	for len(out) < n && time.Now().Before(deadline) {
		resp, err := s.Fetch(ctxFor(t, time.Minute), &sdk.FetchRequest{Max: n - len(out), Wait: time.Second})
		if err != nil {
			t.Fatalf("Fetch: %v", err)
		}
		out = append(out, resp.Messages...)
	}
	return out
}

func positions(ms []sdk.DeadLetter) []sdk.Position {
	out := make([]sdk.Position, len(ms))
	for i, m := range ms {
		out[i] = m.Position
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return bytes.Compare(a.ID, b.ID) < 0
	})
	return out
}

// positionKey identifies a position in a map.
func positionKey(p sdk.Position) string { return p.Topic + "\x00" + string(p.ID) }

func configure(t testing.TB, s sdk.DLQSource, cfg map[string]any) sdk.SourceTraits {
	t.Helper()
	resp, err := s.Configure(ctxFor(t, time.Minute), &sdk.ConfigureRequest{Name: "conformance", Config: cfg})
	if err != nil {
		t.Fatalf("Configure with the fixture's config: %v", err)
	}
	return resp.Source
}

// BrokerHeadersFixture is a SourceFixture whose broker adds headers to a
// message when it dead-letters it (RabbitMQ's x-death, x-first-death-*,
// and from 3.13 x-last-death-*), or whose source hands over more than the
// message's headers (AMQP properties): the kit leaves those keys out when
// it compares headers with what was produced.
type BrokerHeadersFixture interface {
	SourceFixture
	HeadersAddedByBroker() []string
}

// TypedFixture is a SourceFixture whose broker types header values (AMQP
// tables): TypedHeader is a header whose type is not plain text, which
// Produce writes with that type.
type TypedFixture interface {
	SourceFixture
	TypedHeader() sdk.Header
}

// RunDLQSource runs the DLQSource conformance checks, by the traits the
// source declares (docs/plugin-authoring.md lists them): positions on every
// message; uncommitted messages fetched again after a restart as the same
// messages (stable positions again, per-delivery ones flagged at new
// positions); committed ones not; headers kept as declared; typed headers
// through fetch and republish; per-message acknowledgement from
// Republish; no secret of the config in an error or on stderr. The DLQ
// topic must be empty when it starts, and Consume takes the next messages
// of a destination (a queue fixture acknowledges what it reads).
func RunDLQSource(t *testing.T, o SourceOptions) {
	f := o.Fixture
	p := Launch(t, o.Binary, sdk.KindDLQSource, o.Env...)
	s := p.Source(t)
	processes := []*Process{p}
	// Processes belong to the whole run, not to the subtest that restarts them.
	restart := func() {
		p.Kill()
		p = Launch(t, o.Binary, sdk.KindDLQSource, o.Env...)
		processes = append(processes, p)
		s = p.Source(t)
		configure(t, s, f.Config(t))
	}
	secrets := &secretSet{}
	secrets.addConfig(f.Config(t), "Config")
	var errs []string // every error the source returned
	noted := func(call string, err error) {
		if err != nil {
			errs = append(errs, call+": "+err.Error())
		}
	}

	t.Run("Configure rejects bad config with field errors", func(t *testing.T) {
		needOption(t, len(o.BadConfigs) > 0, "no BadConfigs given")
		for name, cfg := range o.BadConfigs {
			secrets.addConfig(cfg, "BadConfigs["+name+"]")
			_, err := s.Configure(ctxFor(t, time.Minute), &sdk.ConfigureRequest{Name: "conformance", Config: cfg})
			noted("Configure", err)
			var e *sdk.Error
			if err == nil || sdk.ClassOf(err) != sdk.ClassPermanent || !asError(err, &e) || len(e.Fields) == 0 {
				t.Errorf("%s: Configure error = %v, want invalid config with field problems", name, err)
			}
		}
	})
	traits := configure(t, s, f.Config(t))
	if err := traits.Check(); err != nil {
		t.Fatalf("the source's traits (ConfigureResponse.Source): %v", err)
	}
	fidelity := headersExact
	if !traits.HeaderOrderKept {
		fidelity = headersUnordered
	}

	// Header keys and values are bytes: every message also carries a header
	// whose key and value are not UTF-8.
	binary := sdk.Header{Key: []byte("bin\xff\x00key"), Value: []byte{0xfe, 0, 0xff}}
	if o.TextHeaders {
		binary = sdk.Header{Key: []byte("text-key"), Value: []byte("text value")}
	}
	var sent []Produced
	for i := 0; i < 20; i++ {
		sent = append(sent, Produced{
			Key:     []byte(fmt.Sprintf("key-%d", i)),
			Value:   []byte(fmt.Sprintf(`{"n":%d}`, i)),
			Headers: []sdk.Header{{Key: []byte("error"), Value: []byte(fmt.Sprintf("failure %d", i))}, binary},
		})
	}
	f.Produce(t, sent)

	var first []sdk.DeadLetter
	t.Run("fetched messages carry positions, keys, headers and values", func(t *testing.T) {
		first = fetchN(t, s, len(sent), time.Minute)
		if len(first) != len(sent) {
			t.Fatalf("fetched %d messages, want %d", len(first), len(sent))
		}
		seen := map[string]bool{}
		byKey := map[string]sdk.DeadLetter{}
		for _, m := range first {
			if m.Position.Topic != f.DLQTopic() {
				t.Errorf("position topic %q, want %q", m.Position.Topic, f.DLQTopic())
			}
			if len(m.Position.ID) == 0 || len(m.Position.ID) > sdk.MaxPositionIDBytes {
				t.Errorf("position id %x: want 1 to %d bytes", m.Position.ID, sdk.MaxPositionIDBytes)
			}
			if seen[positionKey(m.Position)] {
				t.Errorf("position %+v delivered twice in one pass", m.Position)
			}
			seen[positionKey(m.Position)] = true
			byKey[string(m.Key)] = m
		}
		for _, want := range sent {
			got, ok := byKey[string(want.Key)]
			if !ok {
				t.Errorf("message with key %s missing", want.Key)
				continue
			}
			if !bytes.Equal(got.Value, want.Value) {
				t.Errorf("value %q, want %q", got.Value, want.Value)
			}
			if problem := fidelity.differ(withoutAdded(f, got.Headers), want.Headers); problem != "" {
				t.Errorf("fetched message %s: %s", want.Key, problem)
			}
		}
	})

	t.Run("uncommitted messages are fetched again after a restart, as the same messages", func(t *testing.T) {
		for _, m := range first {
			if m.Redelivered {
				t.Errorf("message %s flagged redelivered on its first delivery: the daemon would take it for a redelivery of an identical one", m.Key)
			}
		}
		restart()
		again := fetchN(t, s, len(sent), time.Minute)
		if traits.Positions == sdk.PositionsStable &&
			fmt.Sprint(positions(again)) != fmt.Sprint(positions(first)) {
			t.Fatalf("after restart fetched %v, want the same uncommitted positions %v (the source declares stable positions)",
				positions(again), positions(first))
		}
		if len(again) != len(first) {
			t.Fatalf("after restart fetched %d messages, want the %d uncommitted", len(again), len(first))
		}
		firstByKey := map[string]sdk.DeadLetter{}
		for _, m := range first {
			firstByKey[string(m.Key)] = m
		}
		// The daemon knows a redelivery by its content: key, value,
		// headers (in the order sent when the source keeps their order)
		// and timestamp, the same on every delivery.
		for _, m := range again {
			was, ok := firstByKey[string(m.Key)]
			switch {
			case !ok:
				t.Errorf("after restart fetched %q, which was not uncommitted", m.Key)
			case traits.Positions == sdk.PositionsPerDelivery && !m.Redelivered:
				t.Errorf("message %s came again without Redelivered: the daemon stores it a second time (per-delivery positions)", m.Key)
			case traits.Positions == sdk.PositionsPerDelivery && positionKey(m.Position) == positionKey(was.Position):
				t.Errorf("message %s came again at the position of its first delivery, %x: per-delivery positions are never reused", m.Key, m.Position.ID)
			case !bytes.Equal(m.Value, was.Value):
				t.Errorf("message %s came again with another value", m.Key)
			case !m.Timestamp.Equal(was.Timestamp):
				t.Errorf("message %s came again with timestamp %v, first with %v: report the message's own time, or none, never the time it was read, "+
					"or the daemon stores the redelivery as another message", m.Key, m.Timestamp, was.Timestamp)
			case traits.HeaderOrderKept && !sameHeaders(m.Headers, was.Headers):
				t.Errorf("message %s came again with headers %q, first with %q, and the source keeps their order", m.Key, m.Headers, was.Headers)
			case !sameHeaders(sortedHeaders(m.Headers), sortedHeaders(was.Headers)):
				t.Errorf("message %s came again with headers %q, first with %q", m.Key, m.Headers, was.Headers)
			}
		}
		if _, err := s.Commit(ctxFor(t, time.Minute), &sdk.CommitRequest{Positions: positions(again)}); err != nil {
			t.Fatalf("Commit: %v", err)
		}
	})

	t.Run("committed messages are not fetched again", func(t *testing.T) {
		restart()
		f.Produce(t, []Produced{{Key: []byte("late"), Value: []byte("after the commit")}})
		got := fetchN(t, s, 1, time.Minute)
		extra := fetchN(t, s, 1, 3*time.Second)
		if len(got) != 1 || string(got[0].Key) != "late" || len(extra) != 0 {
			t.Fatalf("after commit and restart fetched %d+%d messages (first key %q), want only the new one", len(got), len(extra), keyOf(got))
		}
		_, _ = s.Commit(ctxFor(t, time.Minute), &sdk.CommitRequest{Positions: positions(got)})
	})

	t.Run("typed headers keep their type through fetch and republish", func(t *testing.T) {
		if !traits.TypedHeaders {
			t.Skip("the source's header values are bytes, untyped")
		}
		tf, ok := f.(TypedFixture)
		needOption(t, ok, "the source declares typed headers, and the fixture is not a TypedFixture")
		typed := tf.TypedHeader()
		f.Produce(t, []Produced{{Key: []byte("typed"), Value: []byte("{}"), Headers: []sdk.Header{typed}}})
		got := fetchN(t, s, 1, time.Minute)
		if len(got) != 1 {
			t.Fatalf("fetched %d messages, want the typed one", len(got))
		}
		if !hasHeader(got[0].Headers, typed) {
			t.Fatalf("fetched headers %+v, want %+v with its type", got[0].Headers, typed)
		}
		_, _ = s.Commit(ctxFor(t, time.Minute), &sdk.CommitRequest{Positions: positions(got)})
		resp, err := s.Republish(ctxFor(t, time.Minute), &sdk.RepublishRequest{Messages: []sdk.RepublishMessage{{
			ID: "typed", Topic: f.RepublishTopic(), Key: []byte("typed"), Value: []byte("{}"), Headers: got[0].Headers}}})
		if err != nil || len(resp.Results) != 1 || !resp.Results[0].Acked {
			t.Fatalf("Republish: %v %+v", err, resp)
		}
		back := f.Consume(t, f.RepublishTopic(), 1)
		if len(back) != 1 || !hasHeader(back[0].Headers, typed) {
			t.Fatalf("republished headers %+v, want %+v with its type", back, typed)
		}
	})

	t.Run("Republish reports per-message acknowledgement", func(t *testing.T) {
		msgs := []sdk.RepublishMessage{
			{ID: "m1", Topic: f.RepublishTopic(), Key: []byte("k1"), Value: []byte(`{"a":1}`), Headers: []sdk.Header{{Key: []byte("x-dlq-id"), Value: []byte("m1")}}},
			{ID: "m2", Topic: f.RepublishTopic(), Key: nil, Value: []byte("raw \x00 bytes"), Headers: []sdk.Header{binary, {Key: []byte("x-dlq-id"), Value: []byte("m2")}}},
			{ID: "bad", Topic: "not a valid topic!", Value: []byte("x")},
		}
		resp, err := s.Republish(ctxFor(t, time.Minute), &sdk.RepublishRequest{Messages: msgs})
		if err != nil {
			t.Fatalf("Republish: %v", err)
		}
		if len(resp.Results) != 3 {
			t.Fatalf("%d results, want 3", len(resp.Results))
		}
		for i, want := range []bool{true, true, false} {
			r := resp.Results[i]
			noted("Republish", r.Err)
			if r.ID != msgs[i].ID || r.Acked != want {
				t.Errorf("result %d = %+v, want id %s acked=%v", i, r, msgs[i].ID, want)
			}
			if !want && r.Err == nil {
				t.Errorf("result %d not acked but without an error", i)
			}
		}
		got := f.Consume(t, f.RepublishTopic(), 2)
		if len(got) != 2 {
			t.Fatalf("consumed %d republished messages, want 2", len(got))
		}
		if o.RepublishValueOnly {
			values := map[string]bool{string(msgs[0].Value): true, string(msgs[1].Value): true}
			for _, m := range got {
				if !values[string(m.Value)] {
					t.Errorf("republished %q, sent only %q and %q", m.Value, msgs[0].Value, msgs[1].Value)
				}
				delete(values, string(m.Value))
			}
			return
		}
		// Messages with different keys may land on different partitions,
		// and a broker orders only within one: match them by x-dlq-id.
		seen := map[string]bool{}
		for _, m := range got {
			id, ok := dlqID(m.Headers, fidelity)
			if !ok {
				t.Errorf("republished message %q has headers %q, want x-dlq-id last", m.Value, m.Headers)
				continue
			}
			var want *sdk.RepublishMessage
			for i := range msgs[:2] {
				if msgs[i].ID == id {
					want = &msgs[i]
				}
			}
			switch {
			case want == nil:
				t.Errorf("republished a message with x-dlq-id %q, sent only m1 and m2", id)
			case seen[id]:
				t.Errorf("message %s republished twice", id)
			case !bytes.Equal(m.Value, want.Value) || !bytes.Equal(m.Key, want.Key):
				t.Errorf("republished %s = %q/%q, want %q/%q", id, m.Key, m.Value, want.Key, want.Value)
			case fidelity.differ(m.Headers, want.Headers) != "":
				t.Errorf("republished %s: %s", id, fidelity.differ(m.Headers, want.Headers))
			}
			seen[id] = true
		}
	})

	t.Run("no secret leaves the plugin", func(t *testing.T) {
		all := secrets.all()
		if len(all) == 0 {
			t.Skip("the fixture's Config holds no secret: put a password in it (in the URL or DSN) so that the kit can check it never leaves the plugin")
		}
		var texts []string
		texts = append(texts, errs...)
		for _, proc := range processes {
			texts = append(texts, strings.Split(proc.Stderr(), "\n")...)
		}
		for _, sec := range all {
			for _, x := range texts {
				if strings.Contains(x, sec.value) {
					t.Errorf("the plugin's errors or stderr hold the secret from %s (%s): %q. Log through sdk.Logger() and return "+
						"errors through the SDK, which scrub config secrets and DSN passwords", sec.where, mask(sec.value),
						strings.ReplaceAll(x, sec.value, mask(sec.value)))
					break
				}
			}
		}
	})
}

func keyOf(ms []sdk.DeadLetter) string {
	if len(ms) == 0 {
		return ""
	}
	return string(ms[0].Key)
}

func asError(err error, target **sdk.Error) bool { return errors.As(err, target) }
