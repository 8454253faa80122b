package dlq_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/dlqtest"
	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

// binaryMessage stores a message whose key, header keys and values and
// payload are not UTF-8, next to the fixture's plain ones.
func binaryMessage(t *testing.T, f *dlqtest.Fixture) uuid.UUID {
	t.Helper()
	in := dlq.Incoming{
		Position:      dlq.LogPosition("kafka", "orders.dlq.v1", 0, 900),
		OriginalTopic: "orders.events.v1",
		ErrorMessage:  "boom",
		Key:           []byte{0, 0xff, 'k'},
		Headers: []dlq.Header{{Key: []byte("bad\xffkey"), Value: []byte{0xfe, 0}}, {Key: []byte("Trace-Id"), Value: []byte("abc")},
			{Key: []byte("trace-id"), Value: []byte("lower")}, {Key: []byte(dlq.HeaderID), Value: []byte("old")}},
		Payload: []byte{0x00, 0x01, 0xff, '{'},
	}
	_, err := f.Store.IngestDLQ(testsvc.Context(t, 30*time.Second), []dlq.Incoming{in}, dlq.IngestOptions{Now: f.Clock.Now(), MaxRetries: 3})
	require.NoError(t, err)
	for _, m := range f.Everything(t) {
		if m.Position.Offset() == 900 {
			return m.ID
		}
	}
	t.Fatal("binary message not stored")
	return uuid.Nil
}

func lastDetail(t *testing.T, h []dlq.HistoryEvent) map[string]any {
	t.Helper()
	var d map[string]any
	require.NoError(t, json.Unmarshal(h[len(h)-1].Detail, &d))
	return d
}

func strp(s string) *string { return &s }

// An edited replay sends exactly the edit, through the source, with the
// stored headers (binary ones included) but those edited, and leaves every
// stored message, the replayed one included, byte for byte as it was; the
// history has it with the caller's uid. A dry run builds the same message
// and sends nothing.
func TestReplaySendsTheEditAndChangesNothingStored(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		f.Ingest(t, 3)
		id := binaryMessage(t, f)
		before := f.Everything(t)
		req := dlq.ReplayRequest{Payload: []byte(`{"fixed":true}`), Key: []byte("new-key"), KeySet: true, Topic: "orders.fixed.v1",
			Headers: map[string]*string{"trace-id": strp("edited"), "Trace-Id": nil, "added": strp("")}}

		dry := req
		dry.DryRun = true
		d, err := f.Svc.Replay(ctx, id, dry, 1001)
		require.NoError(t, err)
		require.True(t, d.DryRun)
		require.Empty(t, f.Broker.Republished, "a dry run sends nothing")
		require.Len(t, f.History(t, id), 1, "and records nothing")
		require.Equal(t, []string{"payload", "key", "headers", "topic"}, dlq.ReplayChanges(d))

		r, err := f.Svc.Replay(ctx, id, req, 1001)
		require.NoError(t, err)
		require.Len(t, f.Broker.Republished, 1)
		sent := f.Broker.Republished[0]
		require.Equal(t, r.ID.String(), sent.ID)
		require.Equal(t, "orders.fixed.v1", sent.Topic)
		require.Equal(t, []byte("new-key"), sent.Key)
		require.Equal(t, []byte(`{"fixed":true}`), sent.Value)
		require.Equal(t, []sdk.Header{
			{Key: []byte("bad\xffkey"), Value: []byte{0xfe, 0}},
			{Key: []byte("added"), Value: []byte("")},
			{Key: []byte("trace-id"), Value: []byte("edited")},
			{Key: []byte(dlq.HeaderReplayOf), Value: []byte(id.String())},
			{Key: []byte(dlq.HeaderReplayID), Value: []byte(r.ID.String())},
		}, sent.Headers)
		// The dry run showed the same message, but for the replay's own id.
		require.Equal(t, d.Payload, r.Payload)
		require.Equal(t, d.Key, r.Key)
		require.Equal(t, d.Headers[:3], r.Headers[:3])

		require.Equal(t, before, f.Everything(t), "no stored message changed, the replayed one included")
		h := f.History(t, id)
		require.Equal(t, dlq.KindReplayed, h[len(h)-1].Kind)
		uid := uint32(1001)
		require.Equal(t, &uid, h[len(h)-1].UID)
		detail := lastDetail(t, h)
		require.Equal(t, r.ID.String(), detail["replay_id"])
		require.Equal(t, dlq.OutcomeResolved, detail["outcome"])
		require.Equal(t, "orders.fixed.v1", detail["topic"])

		// Nothing given: the stored message as it is, to its original topic.
		r, err = f.Svc.Replay(ctx, id, dlq.ReplayRequest{}, 1001)
		require.NoError(t, err)
		sent = f.Broker.Republished[1]
		require.Equal(t, "orders.events.v1", sent.Topic)
		require.Equal(t, []byte{0, 0xff, 'k'}, sent.Key)
		require.Equal(t, []byte{0x00, 0x01, 0xff, '{'}, sent.Value)
		require.Len(t, sent.Headers, 5, "the stored x-dlq-id is not sent; the replay's own headers are")
		require.Empty(t, dlq.ReplayChanges(r))
		require.Equal(t, before, f.Everything(t))
	})
}

// Every refusal is a documented error, and nothing is sent, stored or
// recorded; a broker refusal is recorded, with its error, and changes no
// message either.
func TestReplayFailuresChangeNothing(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		ids := f.Ingest(t, 2)
		id := ids[0]
		_, err := f.Store.IngestDLQ(ctx, []dlq.Incoming{{Position: dlq.LogPosition("kafka", "payments.dlq.v1", 0, 1),
			OriginalTopic: "payments.v1", ErrorMessage: "x", Payload: []byte("{}")}}, dlq.IngestOptions{Now: dlqtest.T0, MaxRetries: 3})
		require.NoError(t, err)
		before := f.Everything(t)
		cases := []struct {
			name string
			id   uuid.UUID
			req  dlq.ReplayRequest
			want error
		}{
			{"unknown id", uuid.New(), dlq.ReplayRequest{}, derrors.ErrNotFound},
			{"its own DLQ topic", id, dlq.ReplayRequest{Topic: "orders.dlq.v1"}, derrors.ErrInvalid},
			{"another DLQ topic", id, dlq.ReplayRequest{Topic: "payments.dlq.v1"}, derrors.ErrInvalid},
			{"a bad topic name", id, dlq.ReplayRequest{Topic: "a\x00b"}, derrors.ErrInvalid},
			{"a reserved header", id, dlq.ReplayRequest{Headers: map[string]*string{"X-DLQ-ID": strp("1")}}, derrors.ErrInvalid},
			{"an empty header name", id, dlq.ReplayRequest{Headers: map[string]*string{"": strp("1")}}, derrors.ErrInvalid},
		}
		for _, c := range cases {
			_, err := f.Svc.Replay(ctx, c.id, c.req, 1)
			require.ErrorIs(t, err, c.want, c.name)
			_, err = f.Svc.Replay(ctx, c.id, dlq.ReplayRequest{Topic: c.req.Topic, Headers: c.req.Headers, DryRun: true}, 1)
			require.ErrorIs(t, err, c.want, "dry run: "+c.name)
		}

		// No original topic, none given: nowhere to send it.
		_, err = f.Store.IngestDLQ(ctx, []dlq.Incoming{{Position: dlq.LogPosition("kafka", "orders.dlq.v1", 0, 77),
			ErrorMessage: "x", Payload: []byte("{}"), LastError: dlq.NoOriginalTopicPrefix + "none"}}, dlq.IngestOptions{Now: dlqtest.T0, MaxRetries: 3})
		require.NoError(t, err)
		var orphan uuid.UUID
		for _, m := range f.Everything(t) {
			if m.Position.Offset() == 77 {
				orphan = m.ID
			}
		}
		_, err = f.Svc.Replay(ctx, orphan, dlq.ReplayRequest{}, 1)
		require.ErrorIs(t, err, derrors.ErrConflict)
		before = f.Everything(t)

		// The source is down: 503, nothing sent or recorded.
		f.Broker.Set(func(b *dlqtest.Broker) { b.Down = errors.New("connection refused") })
		_, err = f.Svc.Replay(ctx, id, dlq.ReplayRequest{}, 1)
		require.ErrorIs(t, err, derrors.ErrUnavailable)
		f.Broker.Set(func(b *dlqtest.Broker) { b.Down, b.Running = nil, false })
		_, err = f.Svc.Replay(ctx, id, dlq.ReplayRequest{}, 1)
		require.ErrorIs(t, err, derrors.ErrUnavailable)
		f.Broker.Set(func(b *dlqtest.Broker) { b.Running = true })
		require.Empty(t, f.Broker.Republished)
		require.Len(t, f.History(t, id), 1, "only the intake")
		require.Equal(t, before, f.Everything(t))

		// The broker refuses the replay: the refusal is in the history.
		f.Broker.Set(func(b *dlqtest.Broker) { b.RefuseAny = sdk.Permanent(errors.New("TOPIC_AUTHORIZATION_FAILED")) })
		_, err = f.Svc.Replay(ctx, id, dlq.ReplayRequest{Topic: "secret.v1"}, 7)
		require.ErrorIs(t, err, dlq.ErrRepublishFailed)
		h := f.History(t, id)
		require.Equal(t, dlq.KindReplayed, h[len(h)-1].Kind)
		d := lastDetail(t, h)
		require.Equal(t, dlq.OutcomeFailed, d["outcome"])
		require.Contains(t, d["error"], "TOPIC_AUTHORIZATION_FAILED")
		require.Equal(t, before, f.Everything(t))
	})
}

// A manual retry names its operator in the history, and so does a
// deletion, which the history outlives.
func TestOperatorActionsAreInTheHistory(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		ids := f.Ingest(t, 2)
		f.Broker.Set(func(b *dlqtest.Broker) { b.Refuse[ids[0].String()] = sdk.Permanent(errors.New("RECORD_TOO_LARGE")) })
		_, err := f.Svc.RetryAs(ctx, ids[0], 42)
		require.ErrorIs(t, err, dlq.ErrRepublishFailed)
		other := f.Get(t, ids[1])
		require.NoError(t, f.Svc.DeleteAs(ctx, ids[0], 43))
		h := f.History(t, ids[0])
		require.Equal(t, []string{dlq.KindIntake, dlq.KindAttempt, dlq.KindDeleted}, []string{h[0].Kind, h[1].Kind, h[2].Kind})
		require.Equal(t, uint32(42), *h[1].UID)
		require.Equal(t, uint32(43), *h[2].UID)
		require.Equal(t, other, f.Get(t, ids[1]))
		require.ErrorIs(t, f.Svc.DeleteAs(ctx, ids[0], 43), derrors.ErrNotFound)
		_, err = f.Svc.History(ctx, uuid.New())
		require.ErrorIs(t, err, derrors.ErrNotFound)
	})
}

// returning is what a source delivers when a replay of m failed again and
// came back to its DLQ topic at offset.
func returning(m dlq.Message, offset int64) sdk.DeadLetter {
	return dlqtest.Kafka(sdk.DeadLetter{Position: sdk.LogPosition(m.Position.Topic, 0, offset), Key: m.Key, Value: m.Payload,
		Headers:   []sdk.Header{{Key: []byte("error"), Value: []byte("still broken")}, {Key: []byte(dlq.HeaderID), Value: []byte(m.ID.String())}},
		Timestamp: dlqtest.T0}, m.OriginalTopic)
}

// When a topic's replays keep coming back (AutoPauseReturns within the
// window), intake pauses the topic: the automatic loop then claims none of
// its messages, so none spends an attempt, while other topics go on; the
// pause is stored, and resuming lets the loop take the topic again.
func TestAutoPauseStopsTheLoopSpendingAttempts(t *testing.T) {
	dlqtest.Each(t, true, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, time.Minute)
		f.Policy.AutoPauseReturns, f.Policy.AutoPauseWindow = 2, 10*time.Minute
		ids := f.Ingest(t, 2)
		_, err := f.Store.IngestDLQ(ctx, []dlq.Incoming{{Position: dlq.LogPosition("kafka", "payments.dlq.v1", 0, 1),
			OriginalTopic: "payments.v1", ErrorMessage: "x", Payload: []byte("{}")}},
			dlq.IngestOptions{Now: dlqtest.T0, MaxRetries: 3, FirstRetryAt: func() *time.Time { t := dlqtest.T0.Add(time.Minute); return &t }})
		require.NoError(t, err)
		for _, id := range ids {
			_, err := f.Svc.Retry(ctx, id)
			require.NoError(t, err)
		}
		a, b := f.Get(t, ids[0]), f.Get(t, ids[1])
		f.Broker.Set(func(br *dlqtest.Broker) { br.Queue = append(br.Queue, returning(*a, 100)) })
		f.StartIntake(t, f.Store, nil)
		testsvc.Eventually(t, 30*time.Second, func() bool { return f.Get(t, ids[0]).RetryCount == 1 }, "first return counted")
		ps, err := f.Svc.Pauses(ctx)
		require.NoError(t, err)
		require.Empty(t, ps, "one return is below the threshold")

		f.Broker.Set(func(br *dlqtest.Broker) { br.Queue = append(br.Queue, returning(*b, 101)) })
		testsvc.Eventually(t, 30*time.Second, func() bool {
			ps, err := f.Svc.Pauses(ctx)
			return err == nil && len(ps) == 1
		}, "auto-paused")
		ps, err = f.Svc.Pauses(ctx)
		require.NoError(t, err)
		require.Equal(t, "orders.dlq.v1", ps[0].Topic)
		require.True(t, ps[0].Auto)
		require.Contains(t, ps[0].Reason, "2 replays came back within 10m0s")
		topics, err := f.Svc.Topics(ctx)
		require.NoError(t, err)
		for _, tp := range topics {
			require.Equal(t, tp.Topic == "orders.dlq.v1", tp.Paused != nil, tp.Topic)
		}

		// Everything is due: only the other topic's message is retried.
		before := f.Everything(t)
		f.Clock.Set(dlqtest.T0.Add(24 * time.Hour))
		sent := len(f.Broker.RepublishedIDs())
		loop := dlq.NewRetryLoop(f.Svc, func() time.Duration { return time.Hour })
		require.NoError(t, loop.RunOnce(ctx))
		require.Len(t, f.Broker.RepublishedIDs(), sent+1, "only payments.dlq.v1")
		require.Equal(t, before, f.Everything(t), "the paused topic's messages spent nothing")

		// The pause holds for another service on the same store (a restart).
		svc2 := dlq.NewService(f.Store, dlqtest.Sources{B: f.Broker}, func() dlq.Policy { return f.Policy }, "daemon-b", hclog.NewNullLogger(),
			dlq.NewMetrics(nil, f.Store, nil, periodic.New(nil)))
		require.NoError(t, dlq.NewRetryLoop(svc2, func() time.Duration { return time.Hour }).RunOnce(ctx))
		require.Len(t, f.Broker.RepublishedIDs(), sent+1)

		require.ErrorIs(t, f.Svc.Resume(ctx, "payments.dlq.v1", 1), derrors.ErrNotFound, "not paused")
		require.NoError(t, f.Svc.Resume(ctx, "orders.dlq.v1", 1))
		require.NoError(t, loop.RunOnce(ctx))
		require.Len(t, f.Broker.RepublishedIDs(), sent+3, "both messages of the resumed topic")

		// The returns behind the pause do not count again: one more return
		// after the resume is below the threshold.
		a = f.Get(t, ids[0])
		f.Clock.Set(dlqtest.T0.Add(24*time.Hour + time.Minute))
		f.Broker.Set(func(br *dlqtest.Broker) { br.Queue = append(br.Queue, returning(*a, 102)) })
		testsvc.Eventually(t, 30*time.Second, func() bool { return f.Get(t, ids[0]).RetryCount == a.RetryCount+1 }, "return counted")
		ps, err = f.Svc.Pauses(ctx)
		require.NoError(t, err)
		require.Empty(t, ps)
	})
}

// A manual pause holds until resumed, pausing twice keeps the first, and
// bad topics are refused before anything is stored.
func TestManualPause(t *testing.T) {
	dlqtest.Each(t, true, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, time.Minute)
		f.Ingest(t, 1)
		p, created, err := f.Svc.Pause(ctx, "orders.dlq.v1", "", 5)
		require.NoError(t, err)
		require.True(t, created)
		require.Equal(t, "paused by an operator", p.Reason)
		p2, created, err := f.Svc.Pause(ctx, "orders.dlq.v1", "again", 6)
		require.NoError(t, err)
		require.False(t, created)
		require.Equal(t, p, p2)
		for _, bad := range []string{"", "a\tb", "..", string(make([]byte, 300))} {
			_, _, err := f.Svc.Pause(ctx, bad, "", 5)
			require.ErrorIs(t, err, derrors.ErrInvalid, "%q", bad)
			require.ErrorIs(t, f.Svc.Resume(ctx, bad, 5), derrors.ErrInvalid)
		}
		_, _, err = f.Svc.Pause(ctx, "x.dlq.v1", string(make([]byte, 2000)), 5)
		require.ErrorIs(t, err, derrors.ErrInvalid)
		ps, err := f.Svc.Pauses(ctx)
		require.NoError(t, err)
		require.Len(t, ps, 1)
		f.Clock.Set(dlqtest.T0.Add(24 * time.Hour))
		require.NoError(t, dlq.NewRetryLoop(f.Svc, func() time.Duration { return time.Hour }).RunOnce(ctx))
		require.Empty(t, f.Broker.RepublishedIDs())
	})
}

// [[dlq.topic]] policy: intake stores each topic's max_retries, and the
// loop leaves a topic whose automatic retries are off alone.
func TestPerTopicPolicy(t *testing.T) {
	dlqtest.Each(t, true, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, time.Minute)
		base := f.Policy
		f.Policy.ForTopic = func(topic string) dlq.Policy {
			p := base
			switch topic {
			case "payments.dlq.v1":
				p.MaxRetries = 7
				p.Backoff.Initial = 7 * time.Minute
			case "orders.dlq.v1":
				p.AutoRetry = false
			}
			return p
		}
		f.Broker.Set(func(b *dlqtest.Broker) {
			for i, topic := range []string{"payments.dlq.v1", "orders.dlq.v1", "other.dlq.v1"} {
				b.Queue = append(b.Queue, dlqtest.Kafka(sdk.DeadLetter{Position: sdk.LogPosition(topic, 0, int64(i)), Value: []byte("{}"),
					Timestamp: dlqtest.T0, Headers: []sdk.Header{{Key: []byte("error"), Value: []byte("e")}}}, "events.v1"))
			}
		})
		f.StartIntake(t, f.Store, nil)
		max := map[string]int{}
		next := map[string]time.Time{}
		testsvc.Eventually(t, 30*time.Second, func() bool {
			for _, topic := range []string{"payments.dlq.v1", "orders.dlq.v1", "other.dlq.v1"} {
				msgs, _, err := f.Store.ListDLQ(ctx, dlq.ListFilter{Topic: topic, Page: 1, PageSize: 10})
				if err != nil || len(msgs) != 1 {
					return false
				}
				max[topic] = msgs[0].MaxRetries
				if msgs[0].NextRetryAt != nil {
					next[topic] = *msgs[0].NextRetryAt
				}
			}
			return true
		}, "all stored")
		require.Equal(t, map[string]int{"payments.dlq.v1": 7, "orders.dlq.v1": 3, "other.dlq.v1": 3}, max)
		require.True(t, next["payments.dlq.v1"].Equal(dlqtest.T0.Add(7*time.Minute)), "the topic's backoff: %s", next["payments.dlq.v1"])
		require.True(t, next["other.dlq.v1"].Equal(dlqtest.T0.Add(time.Minute)), "[retry]'s backoff: %s", next["other.dlq.v1"])
		// The payments message is refused: its next retry follows its topic's backoff.
		pay, _, err := f.Store.ListDLQ(ctx, dlq.ListFilter{Topic: "payments.dlq.v1", Page: 1, PageSize: 1})
		require.NoError(t, err)
		f.Broker.Set(func(b *dlqtest.Broker) { b.Refuse[pay[0].ID.String()] = sdk.Permanent(errors.New("INVALID_RECORD")) })
		f.Clock.Set(dlqtest.T0.Add(24 * time.Hour))
		require.NoError(t, dlq.NewRetryLoop(f.Svc, func() time.Duration { return time.Hour }).RunOnce(ctx))
		require.Len(t, f.Broker.RepublishedIDs(), 1, "orders.dlq.v1 has automatic retries off; payments was refused")
		got := f.Get(t, pay[0].ID)
		require.Equal(t, 1, got.RetryCount)
		require.True(t, got.NextRetryAt.Equal(dlqtest.T0.Add(24*time.Hour+14*time.Minute)), "7m x 2 after the first failure: %s", got.NextRetryAt)
	})
}

// A typed header (an AMQP int32, a property) keeps its type through an
// edit-and-replay and a plain retry: before, a replay sent every header as
// plain bytes, so RabbitMQ got the properties as headers and x-death as a
// string. An edited header keeps the type of the header it replaces.
func TestReplayAndRetryKeepHeaderTypes(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		in := dlq.Incoming{
			Position:      dlq.Position{Source: "kafka", Topic: "orders:dlq", ID: []byte{0xd, 1}, Display: "delivery 1"},
			OriginalTopic: "orders/order.created", ErrorMessage: "rejected", Payload: []byte(`{}`),
			Headers: []dlq.Header{{Key: []byte("attempt"), Value: []byte("3"), Type: "int32"},
				{Key: []byte("content_type"), Value: []byte("application/json"), Type: "property"}},
		}
		_, err := f.Store.IngestDLQ(ctx, []dlq.Incoming{in}, dlq.IngestOptions{Now: f.Clock.Now(), MaxRetries: 3})
		require.NoError(t, err)
		msgs, _, err := f.Store.ListDLQ(ctx, dlq.ListFilter{Topic: "orders:dlq", Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.Len(t, msgs, 1)
		id := msgs[0].ID
		require.Equal(t, in.Headers, msgs[0].Headers, "stored with their types")

		_, err = f.Svc.Replay(ctx, id, dlq.ReplayRequest{Topic: "orders/order.created", Headers: map[string]*string{"attempt": strp("4")}}, 1001)
		require.NoError(t, err)
		sent := f.Broker.Republished[len(f.Broker.Republished)-1]
		require.Equal(t, []sdk.Header{{Key: []byte("content_type"), Value: []byte("application/json"), Type: "property"},
			{Key: []byte("attempt"), Value: []byte("4"), Type: "int32"}}, sent.Headers[:2])

		_, err = f.Svc.Retry(ctx, id)
		require.NoError(t, err)
		sent = f.Broker.Republished[len(f.Broker.Republished)-1]
		require.Equal(t, in.Headers[0], dlq.Header{Key: sent.Headers[0].Key, Value: sent.Headers[0].Value, Type: sent.Headers[0].Type})
		require.Equal(t, "property", sent.Headers[1].Type)
	})
}
