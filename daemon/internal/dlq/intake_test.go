package dlq_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
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
	stored   map[sdk.Position]bool
}

func (s *flakyStore) IngestDLQ(ctx context.Context, batch []dlq.Incoming, opts dlq.IngestOptions) (dlq.IngestResult, error) {
	if s.failures.Add(-1) >= 0 {
		return dlq.IngestResult{}, errors.New("connection reset by peer")
	}
	res, err := s.Store.IngestDLQ(ctx, batch, opts)
	if err == nil {
		s.mu.Lock()
		for _, in := range batch {
			s.stored[sdk.Position{Topic: in.Position.Topic, Partition: in.Position.Partition, Offset: in.Position.Offset}] = true
		}
		s.mu.Unlock()
	}
	return res, err
}

func (s *flakyStore) has(p sdk.Position) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stored[p]
}

func deadLetters(from, n int) []sdk.DeadLetter {
	out := make([]sdk.DeadLetter, n)
	for i := range out {
		off := int64(from + i)
		out[i] = sdk.DeadLetter{
			Position:      sdk.Position{Topic: "orders.dlq.v1", Partition: int32(off % 3), Offset: off},
			Headers:       []sdk.Header{{Key: []byte("kafka_dlt-exception-message"), Value: []byte("NPE")}},
			Value:         []byte(fmt.Sprintf(`{"n":%d}`, off)),
			OriginalTopic: "orders.events.v1",
		}
	}
	return out
}

func TestIntakeStoresEverythingOnceAndCommitsOnlyWhatIsStored(t *testing.T) {
	each(t, true, func(t *testing.T, f *fixture) {
		fs := &flakyStore{Store: f.store, stored: map[sdk.Position]bool{}}
		fs.failures.Store(3)
		f.broker.set(func(b *broker) {
			b.queue = deadLetters(0, 5000)
			b.stored = fs.has
		})
		in := intake.New(fs, sources{f.broker}, func() dlq.Policy { return f.policy },
			intake.Config{BatchSize: 500, Wait: 50 * time.Millisecond, Now: f.clock.now}, hclog.NewNullLogger(), intake.NewMetrics(nil, periodic.New(nil)))
		require.NoError(t, in.Start(testsvc.Context(t, time.Minute)))
		t.Cleanup(func() { _ = in.Stop(testsvc.Context(t, time.Minute)) })

		// The source redelivers a stretch it had already handed out, as
		// Kafka does after a rebalance: stored once.
		f.broker.set(func(b *broker) { b.queue = append(b.queue, deadLetters(1000, 700)...) })

		committed := func() int {
			f.broker.mu.Lock()
			defer f.broker.mu.Unlock()
			return len(f.broker.committed)
		}
		// 90 s: intake fingerprints every message and indexes its payload
		// (issue 13); under -race on SQLite, on a loaded 2-CPU machine, the
		// 5,700 messages and the three failed batches took over 30 s.
		testsvc.Eventually(t, 90*time.Second, func() bool { return committed() == 5700 }, "every fetched message committed (%d)", committed())
		require.NoError(t, in.Stop(testsvc.Context(t, time.Minute)))

		ctx := testsvc.Context(t, 30*time.Second)
		msgs, total, err := f.store.ListDLQ(ctx, dlq.ListFilter{Topic: "orders.dlq.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.EqualValues(t, 5000, total, "redelivered positions are not stored twice")
		m := msgs[0]
		require.Equal(t, "orders.events.v1", m.OriginalTopic)
		require.Equal(t, "NPE", m.ErrorMessage)
		require.Equal(t, dlq.StatusPending, m.Status)
		require.WithinDuration(t, t0.Add(time.Minute), *m.NextRetryAt, 0, "first automatic retry after initial_delay")
		require.Empty(t, f.broker.early, "no position committed before it was stored")
		require.LessOrEqual(t, fs.failures.Load(), int32(-1), "the failed batches were retried")
	})
}

func TestIntakePausesWhileTheSourceIsDown(t *testing.T) {
	each(t, false, func(t *testing.T, f *fixture) {
		f.broker.set(func(b *broker) {
			b.down = sdk.Unavailable(errors.New("all brokers down"))
			b.queue = deadLetters(0, 10)
		})
		in := intake.New(f.store, sources{f.broker}, func() dlq.Policy { return f.policy },
			intake.Config{BatchSize: 100, Wait: 20 * time.Millisecond}, hclog.NewNullLogger(), intake.NewMetrics(nil, periodic.New(nil)))
		require.NoError(t, in.Start(testsvc.Context(t, time.Minute)))
		t.Cleanup(func() { _ = in.Stop(testsvc.Context(t, time.Minute)) })

		time.Sleep(300 * time.Millisecond)
		ctx := testsvc.Context(t, 30*time.Second)
		_, total, err := f.store.ListDLQ(ctx, dlq.ListFilter{Topic: "orders.dlq.v1", Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.Zero(t, total)

		f.broker.set(func(b *broker) { b.down = nil })
		testsvc.Eventually(t, 30*time.Second, func() bool {
			_, total, err = f.store.ListDLQ(ctx, dlq.ListFilter{Topic: "orders.dlq.v1", Page: 1, PageSize: 10})
			return err == nil && total == 10
		}, "intake resumes when the broker is back")
	})
}
