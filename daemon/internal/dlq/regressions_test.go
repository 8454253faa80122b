package dlq_test

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/dlqtest"
	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

// renamedSources is the plugin host after the source "kafka" was renamed.
type renamedSources struct{ b *dlqtest.Broker }

func (s renamedSources) SourceNames() []string { return []string{"kafka-prod"} }

func (s renamedSources) Source(name string) (sdk.DLQSource, error) {
	return dlqtest.Sources{B: s.b}.Source(map[string]string{"kafka-prod": "kafka"}[name])
}

func (s renamedSources) Running(name string) bool { return name == "kafka-prod" }

// The source a message was taken in by was renamed: every automatic retry
// found no source, counted nothing and put it back, forever, and its
// "unavailable" entries pushed the real history out. The loop now leaves
// it alone; Topics and the metrics say it waits for its source.
func TestRetryLoopLeavesMessagesOfAnUnconfiguredSourceAlone(t *testing.T) {
	dlqtest.Each(t, true, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		id := f.Ingest(t, 1)[0]
		metrics := dlq.NewMetrics(nil, f.Store, renamedSources{f.Broker}, periodic.New(nil))
		svc := dlq.NewService(f.Store, renamedSources{f.Broker}, func() dlq.Policy { return f.Policy }, "daemon-a", hclog.NewNullLogger(), metrics,
			dlq.WithClock(f.Clock.Now))
		loop := dlq.NewRetryLoop(svc, func() time.Duration { return time.Hour })
		before := f.Get(t, id)
		for i := 1; i <= 60; i++ {
			f.Clock.Set(dlqtest.T0.Add(time.Duration(i) * time.Hour))
			require.NoError(t, loop.RunOnce(ctx))
		}
		require.Equal(t, before, f.Get(t, id), "never claimed, nothing written")
		require.Empty(t, f.Broker.RepublishedIDs())
		require.False(t, svc.SourceConfigured("kafka"))

		topics, err := svc.Topics(ctx)
		require.NoError(t, err)
		require.Len(t, topics, 1)
		require.Equal(t, map[string]int64{"kafka": 1}, topics[0].UnconfiguredSources)
		_, err = svc.Retry(ctx, id)
		require.ErrorContains(t, err, `source "kafka" is not configured`)
		require.Equal(t, before, f.Get(t, id))
	})
}

// A source that stays down: retries find it unavailable again and again.
// One history entry counts them; the real attempts stay.
func TestASourceThatStaysDownLeavesOneHistoryEntry(t *testing.T) {
	dlqtest.Each(t, true, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		id := f.Ingest(t, 1)[0]
		f.Broker.Set(func(b *dlqtest.Broker) { b.Refuse[id.String()] = sdk.Permanent(errors.New("topic refused")) })
		loop := dlq.NewRetryLoop(f.Svc, func() time.Duration { return time.Hour })
		f.Clock.Set(dlqtest.T0.Add(time.Hour))
		require.NoError(t, loop.RunOnce(ctx))
		f.Broker.Set(func(b *dlqtest.Broker) { b.Down = sdk.Unavailable(errors.New("broker unreachable")) })
		for i := 2; i <= 80; i++ {
			f.Clock.Set(dlqtest.T0.Add(time.Duration(i) * time.Hour))
			require.NoError(t, loop.RunOnce(ctx))
		}
		m := f.Get(t, id)
		require.Equal(t, 1, m.RetryCount)
		require.Len(t, m.Attempts, 2)
		require.Equal(t, dlq.OutcomeFailed, m.Attempts[0].Outcome)
		require.Equal(t, dlq.OutcomeUnavailable, m.Attempts[1].Outcome)
		require.Equal(t, 79, m.Attempts[1].Count)
		require.True(t, dlqtest.T0.Add(80*time.Hour).Equal(*m.Attempts[1].LastAt))
	})
}

// A replay that came back while the next republish of its record was in
// flight took the record out of its claim: the broker's acknowledgement
// was then dropped, yet Retry answered RESOLVED over a PENDING record. The
// return is now counted under the claim, the acknowledgement recorded, and
// Retry answers what is stored.
func TestRetryRecordsItsAcknowledgementDespiteAReturnMeanwhile(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		ctx := testsvc.Context(t, 30*time.Second)
		id := f.Ingest(t, 1)[0]
		m, err := f.Svc.Retry(ctx, id)
		require.NoError(t, err)
		require.Equal(t, dlq.StatusResolved, m.Status)
		returned := func(offset int64, why string) {
			t.Helper()
			in := dlq.Incoming{Position: dlq.LogPosition("kafka", "orders.dlq.v1", 0, offset), OriginalTopic: "orders.events.v1",
				ErrorMessage: why, Payload: []byte(`{"n":0}`), FeedbackOf: &id}
			res, err := f.Store.IngestDLQ(ctx, []dlq.Incoming{in}, dlq.IngestOptions{Now: f.Clock.Now(), MaxRetries: 3})
			require.NoError(t, err)
			require.Equal(t, 1, res.Feedback)
		}
		returned(10, "group X failed")
		f.Broker.Set(func(b *dlqtest.Broker) { b.During = func() { returned(11, "group Y failed") } })

		m, err = f.Svc.Retry(ctx, id)
		require.NoError(t, err)
		stored := f.Get(t, id)
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

func (renamedSources) Traits(string) sdk.SourceTraits { return sdk.Protocol2Traits }
