package dlq

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lifecycled/lifecycled/daemon/internal/retry"
	"github.com/lifecycled/lifecycled/sdk"
)

// IntakeConfig tunes the intake loops.
type IntakeConfig struct {
	BatchSize int           // messages per fetch
	Wait      time.Duration // how long a fetch waits for a first message
}

// Intake runs one loop per configured source: fetch a batch, store it in one
// round trip, then commit it. A batch that cannot be stored is retried as is
// and nothing after it is fetched, so no offset is ever committed past a
// message that is not stored: at-least-once, no loss; redeliveries are
// absorbed by the unique position.
type Intake struct {
	store   Store
	sources Sources
	policy  func() Policy
	cfg     IntakeConfig
	log     hclog.Logger
	metrics *Metrics
	now     func() time.Time

	mu      sync.Mutex
	running map[string]context.CancelFunc
	wg      sync.WaitGroup
}

// NewIntake returns the intake; Start launches its loops.
func NewIntake(store Store, sources Sources, policy func() Policy, cfg IntakeConfig, log hclog.Logger, m *Metrics) *Intake {
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 500
	}
	if cfg.Wait <= 0 {
		cfg.Wait = time.Second
	}
	return &Intake{store: store, sources: sources, policy: policy, cfg: cfg, log: log.Named("dlq.intake"), metrics: m,
		now: time.Now, running: map[string]context.CancelFunc{}}
}

// Start launches a loop for every configured source.
func (in *Intake) Start(context.Context) error {
	in.Sync()
	return nil
}

// Sync starts loops for sources added by a reload and stops loops of
// removed ones.
func (in *Intake) Sync() {
	in.mu.Lock()
	defer in.mu.Unlock()
	want := map[string]bool{}
	for _, name := range in.sources.SourceNames() {
		want[name] = true
		if _, ok := in.running[name]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		in.running[name] = cancel
		in.wg.Add(1)
		go func() {
			defer in.wg.Done()
			in.loop(ctx, name)
		}()
	}
	for name, cancel := range in.running {
		if !want[name] {
			cancel()
			delete(in.running, name)
		}
	}
}

// Stop ends every loop; a batch fetched but not stored is not committed and
// comes again after the next start.
func (in *Intake) Stop(ctx context.Context) error {
	in.mu.Lock()
	for name, cancel := range in.running {
		cancel()
		delete(in.running, name)
	}
	in.mu.Unlock()
	done := make(chan struct{})
	go func() { in.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

var errorBackoff = retry.Policy{Initial: 200 * time.Millisecond, Multiplier: 2, Max: 30 * time.Second, Jitter: retry.JitterEqual}

func (in *Intake) loop(ctx context.Context, name string) {
	log := in.log.With("source", name)
	failures := 0
	pause := func(what string, err error) bool {
		// Log the first failure and then every tenth, not every retry.
		if failures == 0 || failures%10 == 0 {
			log.Warn(what, "error", err, "failures", failures+1)
		}
		d := errorBackoff.Delay(failures)
		failures++
		return sleepCtx(ctx, d)
	}
	for ctx.Err() == nil {
		src, err := in.sources.Source(name)
		if err != nil || !in.sources.Running(name) {
			if err == nil {
				err = errors.New("source plugin is not running")
			}
			if !pause("dead-letter source unavailable; intake paused", err) {
				return
			}
			continue
		}
		resp, err := src.Fetch(ctx, &sdk.FetchRequest{Max: in.cfg.BatchSize, Wait: in.cfg.Wait})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !pause("fetch dead letters", err) {
				return
			}
			continue
		}
		if len(resp.Messages) == 0 {
			in.metrics.markSuccess(jobIntake, in.cfg.Wait)
			continue
		}
		batch := make([]Incoming, len(resp.Messages))
		positions := make([]sdk.Position, len(resp.Messages))
		for i, m := range resp.Messages {
			batch[i] = Interpret(name, m)
			positions[i] = m.Position
		}
		// Store the batch, however long it takes: fetching on would let a
		// later commit cover these offsets.
		for {
			res, err := in.store.IngestDLQ(ctx, batch, in.ingestOptions())
			if err == nil {
				in.metrics.ingested.WithLabelValues(name).Add(float64(res.Inserted))
				in.metrics.duplicates.WithLabelValues(name).Add(float64(res.Duplicates))
				in.metrics.returned.WithLabelValues(name).Add(float64(res.Feedback))
				in.metrics.dead.Add(float64(res.Dead))
				break
			}
			if ctx.Err() != nil {
				return // not committed: fetched again after the restart
			}
			if !pause("store dead letters (batch kept, will retry)", err) {
				return
			}
		}
		failures = 0
		if _, err := src.Commit(ctx, &sdk.CommitRequest{Positions: positions}); err != nil && ctx.Err() == nil {
			// Stored but not committed: a later commit covers these offsets,
			// and a redelivery meanwhile is stored once.
			log.Warn("commit offsets", "error", err, "messages", len(positions))
		}
		in.metrics.markSuccess(jobIntake, in.cfg.Wait)
	}
}

func (in *Intake) ingestOptions() IngestOptions {
	pol := in.policy()
	now := in.now()
	opts := IngestOptions{Now: now, MaxRetries: pol.MaxRetries}
	if pol.AutoRetry {
		first := now.Add(pol.Backoff.Delay(0))
		opts.NextRetryAt = &first
		opts.FeedbackRetryAt = func(attempt int) *time.Time {
			t := now.Add(pol.Backoff.Delay(attempt))
			return &t
		}
	}
	return opts
}
