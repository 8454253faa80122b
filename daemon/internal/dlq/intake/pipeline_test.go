package intake_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/dlqtest"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/intake"
	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

// flakyStore is the real state store with the first failures IngestDLQ
// calls failing, as when the database restarts; it remembers which
// positions were durably stored so early commits can be detected.
type flakyStore struct {
	dlq.Store
	failures atomic.Int32
	mu       sync.Mutex
	stored   map[string]bool // by storedKey
}

func (s *flakyStore) IngestDLQ(ctx context.Context, batch []dlq.Incoming, opts dlq.IngestOptions) (dlq.IngestResult, error) {
	if s.failures.Add(-1) >= 0 {
		return dlq.IngestResult{}, errors.New("connection reset by peer")
	}
	res, err := s.Store.IngestDLQ(ctx, batch, opts)
	if err == nil {
		s.mu.Lock()
		for _, in := range batch {
			s.stored[storedKey(in.Position.Topic, in.Position.ID)] = true
		}
		s.mu.Unlock()
	}
	return res, err
}

func (s *flakyStore) has(p sdk.Position) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stored[storedKey(p.Topic, p.ID)]
}

func storedKey(topic string, id []byte) string { return topic + "\x00" + string(id) }

func TestIntakeStoresEverythingOnceAndCommitsOnlyWhatIsStored(t *testing.T) {
	dlqtest.Each(t, true, func(t *testing.T, f *dlqtest.Fixture) {
		fs := &flakyStore{Store: f.Store, stored: map[string]bool{}}
		fs.failures.Store(3)
		f.Broker.Set(func(b *dlqtest.Broker) {
			b.Queue = dlqtest.DeadLetters(0, 5000)
			b.Stored = fs.has
		})
		in := intake.New(fs, dlqtest.Sources{B: f.Broker}, func() dlq.Policy { return f.Policy },
			intake.Config{BatchSize: 500, Wait: 50 * time.Millisecond, Now: f.Clock.Now}, hclog.NewNullLogger(), intake.NewMetrics(nil, periodic.New(nil)))
		require.NoError(t, in.Start(testsvc.Context(t, time.Minute)))
		t.Cleanup(func() { _ = in.Stop(testsvc.Context(t, time.Minute)) })

		// The source redelivers a stretch it had already handed out, as
		// Kafka does after a rebalance: stored once.
		f.Broker.Set(func(b *dlqtest.Broker) { b.Queue = append(b.Queue, dlqtest.DeadLetters(1000, 700)...) })

		committed := func() int {
			return f.Broker.CommittedCount()
		}
		// 90 s: intake fingerprints every message and indexes its payload
		// (issue 13); under -race on SQLite, on a loaded 2-CPU machine, the
		// 5,700 messages and the three failed batches took over 30 s.
		testsvc.Eventually(t, 90*time.Second, func() bool { return committed() == 5700 }, "every fetched message committed (%d)", committed())
		require.NoError(t, in.Stop(testsvc.Context(t, time.Minute)))

		ctx := testsvc.Context(t, 30*time.Second)
		msgs, total, err := f.Store.ListDLQ(ctx, dlq.ListFilter{Topic: "orders.dlq.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.EqualValues(t, 5000, total, "redelivered positions are not stored twice")
		m := msgs[0]
		require.Equal(t, "orders.events.v1", m.OriginalTopic)
		require.Equal(t, "NPE", m.ErrorMessage)
		require.Equal(t, dlq.StatusPending, m.Status)
		require.WithinDuration(t, dlqtest.T0.Add(time.Minute), *m.NextRetryAt, 0, "first automatic retry after initial_delay")
		require.Empty(t, f.Broker.Early, "no position committed before it was stored")
		require.LessOrEqual(t, fs.failures.Load(), int32(-1), "the failed batches were retried")
	})
}

func TestIntakePausesWhileTheSourceIsDown(t *testing.T) {
	dlqtest.Each(t, false, func(t *testing.T, f *dlqtest.Fixture) {
		f.Broker.Set(func(b *dlqtest.Broker) {
			b.Down = sdk.Unavailable(errors.New("all brokers down"))
			b.Queue = dlqtest.DeadLetters(0, 10)
		})
		in := intake.New(f.Store, dlqtest.Sources{B: f.Broker}, func() dlq.Policy { return f.Policy },
			intake.Config{BatchSize: 100, Wait: 20 * time.Millisecond}, hclog.NewNullLogger(), intake.NewMetrics(nil, periodic.New(nil)))
		require.NoError(t, in.Start(testsvc.Context(t, time.Minute)))
		t.Cleanup(func() { _ = in.Stop(testsvc.Context(t, time.Minute)) })

		time.Sleep(300 * time.Millisecond)
		ctx := testsvc.Context(t, 30*time.Second)
		_, total, err := f.Store.ListDLQ(ctx, dlq.ListFilter{Topic: "orders.dlq.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.Zero(t, total)

		f.Broker.Set(func(b *dlqtest.Broker) { b.Down = nil })
		testsvc.Eventually(t, 30*time.Second, func() bool {
			_, total, err = f.Store.ListDLQ(ctx, dlq.ListFilter{Topic: "orders.dlq.v1", Page: 1, PageSize: 10})
			return err == nil && total == 10
		}, "intake resumes when the broker is back")
	})
}
