package dlq_test

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

// PostgreSQL's jsonb refuses a number out of numeric's range that Go's
// json.Valid accepts. The one-by-one fallback kept the payload in its
// degraded copy, was refused again, and the source's intake never moved:
// the message is now stored without its JSON copy, with everything else
// read from its headers, and the intake goes on.
func TestIntakeStoresJSONTheStoreRefusesWithoutItsJSONCopy(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		const huge = `{"amount":1e1000000}`
		dls := deadLetters(0, 10)
		dls[3].Value = []byte(huge)
		f.broker.set(func(b *broker) { b.queue = dls })
		f.intake(t, f.store, nil)
		var got map[int64]dlq.Message
		testsvc.Eventually(t, time.Minute, func() bool { got = f.all(t, "orders.dlq.v1"); return len(got) == 10 }, "all ten stored")
		m := got[3]
		require.Equal(t, []byte(huge), m.Payload, "kept byte for byte")
		require.Equal(t, "orders.events.v1", m.OriginalTopic, "what the headers and the source said is kept")
		require.Equal(t, "NPE", m.ErrorMessage)
		require.True(t, m.IsRetryable())
		if pg, ok := f.store.(*store.Postgres); ok {
			var hasJSON bool
			require.NoError(t, pg.Pool().QueryRow(testsvc.Context(t, 30*time.Second),
				`SELECT payload IS NOT NULL FROM dlq.dlq_messages WHERE id = $1`, m.ID).Scan(&hasJSON))
			require.False(t, hasJSON, "no jsonb copy")
		}
		testsvc.Eventually(t, 30*time.Second, func() bool {
			f.broker.mu.Lock()
			defer f.broker.mu.Unlock()
			return len(f.broker.committed) == 10
		}, "committed once stored")
	})
}

// renamedSources is the plugin host after the source "kafka" was renamed.
type renamedSources struct{ b *broker }

func (s renamedSources) SourceNames() []string { return []string{"kafka-prod"} }
func (s renamedSources) Source(name string) (sdk.DLQSource, error) {
	return sources{s.b}.Source(map[string]string{"kafka-prod": "kafka"}[name])
}
func (s renamedSources) Running(name string) bool { return name == "kafka-prod" }

// The source a message was taken in by was renamed: every automatic retry
// found no source, counted nothing and put it back, forever, and its
// "unavailable" entries pushed the real history out. The loop now leaves
// it alone; Topics and the metrics say it waits for its source.
func TestRetryLoopLeavesMessagesOfAnUnconfiguredSourceAlone(t *testing.T) {
	each(t, true, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		id := f.ingest(t, 1)[0]
		metrics := dlq.NewMetrics(nil, f.store, renamedSources{f.broker}, periodic.New(nil))
		svc := dlq.NewService(f.store, renamedSources{f.broker}, func() dlq.Policy { return f.policy }, "daemon-a", hclog.NewNullLogger(), metrics)
		dlq.SetClock(svc, f.clock.now)
		loop := dlq.NewRetryLoop(svc, func() time.Duration { return time.Hour })
		before := f.get(t, id)
		for i := 1; i <= 60; i++ {
			f.clock.set(t0.Add(time.Duration(i) * time.Hour))
			require.NoError(t, loop.RunOnce(ctx))
		}
		require.Equal(t, before, f.get(t, id), "never claimed, nothing written")
		require.Empty(t, f.broker.republishedIDs())
		require.False(t, svc.SourceConfigured("kafka"))

		topics, err := svc.Topics(ctx)
		require.NoError(t, err)
		require.Len(t, topics, 1)
		require.Equal(t, map[string]int64{"kafka": 1}, topics[0].UnconfiguredSources)
		_, err = svc.Retry(ctx, id)
		require.ErrorContains(t, err, `source "kafka" is not configured`)
		require.Equal(t, before, f.get(t, id))
	})
}

// A source that stays down: retries find it unavailable again and again.
// One history entry counts them; the real attempts stay.
func TestASourceThatStaysDownLeavesOneHistoryEntry(t *testing.T) {
	each(t, true, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		id := f.ingest(t, 1)[0]
		f.broker.set(func(b *broker) { b.refuse[id.String()] = sdk.Permanent(errors.New("topic refused")) })
		loop := dlq.NewRetryLoop(f.svc, func() time.Duration { return time.Hour })
		f.clock.set(t0.Add(time.Hour))
		require.NoError(t, loop.RunOnce(ctx))
		f.broker.set(func(b *broker) { b.down = sdk.Unavailable(errors.New("broker unreachable")) })
		for i := 2; i <= 80; i++ {
			f.clock.set(t0.Add(time.Duration(i) * time.Hour))
			require.NoError(t, loop.RunOnce(ctx))
		}
		m := f.get(t, id)
		require.Equal(t, 1, m.RetryCount)
		require.Len(t, m.Attempts, 2)
		require.Equal(t, dlq.OutcomeFailed, m.Attempts[0].Outcome)
		require.Equal(t, dlq.OutcomeUnavailable, m.Attempts[1].Outcome)
		require.Equal(t, 79, m.Attempts[1].Count)
		require.True(t, t0.Add(80*time.Hour).Equal(*m.Attempts[1].LastAt))
	})
}

// A replay that came back while the next republish of its record was in
// flight took the record out of its claim: the broker's acknowledgement
// was then dropped, yet Retry answered RESOLVED over a PENDING record. The
// return is now counted under the claim, the acknowledgement recorded, and
// Retry answers what is stored.
func TestRetryRecordsItsAcknowledgementDespiteAReturnMeanwhile(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		id := f.ingest(t, 1)[0]
		m, err := f.svc.Retry(ctx, id)
		require.NoError(t, err)
		require.Equal(t, dlq.StatusResolved, m.Status)
		returned := func(offset int64, why string) {
			t.Helper()
			in := dlq.Incoming{Position: dlq.Position{Source: "kafka", Topic: "orders.dlq.v1", Offset: offset}, OriginalTopic: "orders.events.v1",
				ErrorMessage: why, Payload: []byte(`{"n":0}`), FeedbackOf: &id}
			res, err := f.store.IngestDLQ(ctx, []dlq.Incoming{in}, dlq.IngestOptions{Now: f.clock.now(), MaxRetries: 3})
			require.NoError(t, err)
			require.Equal(t, 1, res.Feedback)
		}
		returned(10, "group X failed")
		f.broker.set(func(b *broker) { b.during = func() { returned(11, "group Y failed") } })

		m, err = f.svc.Retry(ctx, id)
		require.NoError(t, err)
		stored := f.get(t, id)
		require.Equal(t, stored.Status, m.Status, "the answer is what is stored")
		require.Equal(t, dlq.StatusResolved, stored.Status)
		require.Equal(t, 2, stored.RetryCount)
		var outcomes []string
		for _, a := range stored.Attempts {
			outcomes = append(outcomes, a.Outcome)
		}
		require.Equal(t, []string{dlq.OutcomeResolved, dlq.OutcomeReturned, dlq.OutcomeReturned, dlq.OutcomeResolved}, outcomes)
	})
}
