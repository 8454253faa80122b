package dlq

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
)

// The search indexer fills the text index that error= and q= searches use,
// off the intake path: intake only queues the ids of what it stored, and
// this loop moves them into the index a batch at a time. A search finds a
// message whether it is indexed yet or not (the store checks the queued
// ones row by row), so the indexer's lag costs search time, never results.

// SearchIndexStore is what the search indexer needs from the state store.
type SearchIndexStore interface {
	// IndexDLQSearch indexes one batch of the messages waiting for the
	// search index. It returns how many queue entries it took (0: none
	// waiting) and how many are still waiting.
	IndexDLQSearch(ctx context.Context) (done int, waiting int64, err error)
}

const jobSearchIndex job = "dlq_search_index"

// searchIndexInterval is the wait between passes when the queue is empty;
// a pass that found work is followed by the next at once.
const searchIndexInterval = time.Second

// SearchIndexer is the loop that fills the search index.
type SearchIndexer struct {
	store   SearchIndexStore
	loop    *periodic.Loop
	waiting prometheus.Gauge
	// last is how many waited after the previous pass (-1: none yet);
	// took is how long it took. Only the loop's goroutine uses them.
	last int64
	took time.Duration
}

// searchIndexYield is how long the indexer waits after a pass, in passes'
// time, while messages keep arriving: intake has the CPU first (on a
// two-core box a busy indexer took a fifth of intake's speed), and the
// indexer catches up at full speed once they stop.
const searchIndexYield = 2

// NewSearchIndexer returns the indexer; reg (nil: none) gets its gauge of
// the messages waiting to be indexed, p its pass metrics.
func NewSearchIndexer(store SearchIndexStore, log hclog.Logger, reg prometheus.Registerer, p *periodic.Metrics) *SearchIndexer {
	ix := &SearchIndexer{store: store, last: -1, waiting: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "lifecycled_dlq_search_unindexed",
		Help: "Dead letters stored but not yet in the search index (searches check them row by row).",
	})}
	if reg != nil {
		reg.MustRegister(ix.waiting)
	}
	ix.loop = periodic.NewLoop(periodic.Config{
		Name: "search index", Job: string(jobSearchIndex), Log: log.Named("dlq"), Metrics: p,
		// A busy pass and its yield take longer than the idle interval:
		// the stale-job alert must not take a storm for a failure.
		Interval: func() time.Duration { return max(searchIndexInterval, 2*(1+searchIndexYield)*ix.took) },
		Timeout:  func() time.Duration { return time.Minute },
		Pass:     ix.pass,
	})
	return ix
}

// Start launches the loop. Stop ends it after the batch in progress; safe
// to call twice.
func (ix *SearchIndexer) Start(ctx context.Context) error { return ix.loop.Start(ctx) }

// Stop ends the loop.
func (ix *SearchIndexer) Stop(ctx context.Context) error { return ix.loop.Stop(ctx) }

// RunOnce indexes one batch; it returns how many queue entries it took
// and how many are still waiting.
func (ix *SearchIndexer) RunOnce(ctx context.Context) (int, int64, error) {
	done, waiting, err := ix.store.IndexDLQSearch(ctx)
	if err == nil {
		ix.waiting.Set(float64(waiting))
	}
	return done, waiting, err
}

func (ix *SearchIndexer) pass(ctx context.Context) (periodic.Outcome, error) {
	start := time.Now()
	done, waiting, err := ix.RunOnce(ctx)
	ix.took = time.Since(start)
	if err != nil {
		return periodic.Done, err
	}
	arrived := ix.last >= 0 && waiting > ix.last-int64(done)
	ix.last = waiting
	if done == 0 || waiting == 0 {
		return periodic.Done, nil
	}
	if arrived {
		t := time.NewTimer(searchIndexYield * ix.took)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return periodic.Done, nil
		}
	}
	return periodic.More, nil
}
