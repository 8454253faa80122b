// Package searchindex is the loop that fills the dead letters' text index
// (the error= and q= searches) off the intake path: intake only queues the
// ids of what it stored, and this loop moves them into the index a batch at
// a time. A search finds a message whether it is indexed yet or not (the
// store checks the queued ones row by row), so the indexer's lag costs
// search time, never results.
package searchindex

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
)

// Store is what the search indexer needs from the state store.
type Store interface {
	// IndexDLQSearch indexes one batch of the messages waiting for the
	// search index. It returns how many queue entries it took (0: none
	// waiting) and how many are still waiting.
	IndexDLQSearch(ctx context.Context) (done int, waiting int64, err error)
	// UnindexedDLQ returns how many messages wait for the search index.
	UnindexedDLQ(ctx context.Context) (int64, error)
}

// job names the loop in the periodic metrics.
const job = "dlq_search_index"

// interval is the wait between passes when there is nothing to
// index or intake has the CPU; a pass that indexed a batch and left some
// is followed by the next at once.
const interval = time.Second

// maxDefer is how long the indexer leaves the CPU to intake
// while messages keep arriving before it indexes one batch all the same:
// a busy indexer beside intake cost more than half of intake's speed on a
// two-core box (bench/results/*-i13p-*.txt), and a storm is over in
// seconds to minutes, after which the indexer catches up at full speed.
// Under a steady trickle it still indexes a batch this often, so its lag
// stays about this long.
const maxDefer = 10 * time.Second

// Indexer is the loop that fills the search index.
type Indexer struct {
	store   Store
	loop    *periodic.Loop
	waiting prometheus.Gauge
	now     func() time.Time
	// Only the loop's goroutine uses these: how many waited after the
	// previous pass (-1: none yet), when a batch was last indexed, how
	// long the last pass took.
	last    int64
	indexed time.Time
	took    time.Duration
}

// New returns the indexer; reg (nil: none) gets its gauge of
// the messages waiting to be indexed, p its pass metrics.
func New(store Store, log hclog.Logger, reg prometheus.Registerer, p *periodic.Metrics) *Indexer {
	ix := &Indexer{store: store, last: -1, now: time.Now, waiting: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "lifecycled_dlq_search_unindexed",
		Help: "Dead letters stored but not yet in the search index (searches check them row by row).",
	})}
	if reg != nil {
		reg.MustRegister(ix.waiting)
	}
	ix.loop = periodic.NewLoop(periodic.Config{
		Name: "search index", Job: job, Log: log.Named("dlq"), Metrics: p,
		// A slow pass (a batch of large payloads) must not look like a
		// stale job to the alert.
		Interval: func() time.Duration { return max(interval, 2*ix.took) },
		Timeout:  func() time.Duration { return time.Minute },
		Pass:     ix.pass,
	})
	return ix
}

// Start launches the loop. Stop ends it after the batch in progress; safe
// to call twice.
func (ix *Indexer) Start(ctx context.Context) error { return ix.loop.Start(ctx) }

// Stop ends the loop.
func (ix *Indexer) Stop(ctx context.Context) error { return ix.loop.Stop(ctx) }

// RunOnce indexes one batch; it returns how many queue entries it took
// and how many are still waiting.
func (ix *Indexer) RunOnce(ctx context.Context) (int, int64, error) {
	done, waiting, err := ix.store.IndexDLQSearch(ctx)
	if err == nil {
		ix.waiting.Set(float64(waiting))
		ix.last, ix.indexed = waiting, ix.now()
	}
	return done, waiting, err
}

// pass indexes a batch unless messages arrived since the previous pass
// and one was indexed less than maxDefer ago.
func (ix *Indexer) pass(ctx context.Context) (periodic.Outcome, error) {
	start := ix.now()
	defer func() { ix.took = ix.now().Sub(start) }()
	waiting, err := ix.store.UnindexedDLQ(ctx)
	if err != nil {
		return periodic.Done, err
	}
	ix.waiting.Set(float64(waiting))
	arrived := ix.last >= 0 && waiting > ix.last
	ix.last = waiting
	if waiting == 0 || (arrived && start.Sub(ix.indexed) < maxDefer) {
		return periodic.Done, nil
	}
	done, waiting, err := ix.RunOnce(ctx)
	if err != nil {
		return periodic.Done, err
	}
	if done > 0 && waiting > 0 {
		return periodic.More, nil
	}
	return periodic.Done, nil
}
