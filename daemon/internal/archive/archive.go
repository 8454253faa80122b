// Package archive is the retention scheduler: every interval it moves
// RESOLVED and DEAD dead letters older than the retention into the archive
// (each batch deletes exactly the rows it copies, so no row is ever lost),
// purges archived rows older than the archive retention, and purges expired
// Idempotency-Keys. With a PostgreSQL state store shared by several daemons,
// one pass runs at a time under an advisory lock; the others skip.
package archive

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
)

// Store is what retention needs from the state store.
type Store interface {
	// ArchiveDLQBatch moves up to limit RESOLVED and DEAD messages last
	// updated before cutoff into the archive, deleting exactly the rows it
	// inserted.
	ArchiveDLQBatch(ctx context.Context, cutoff time.Time, limit int) (int64, error)
	// PurgeDLQArchiveBatch drops up to limit archived messages last updated before cutoff.
	PurgeDLQArchiveBatch(ctx context.Context, cutoff time.Time, limit int) (int64, error)
	// PurgeExpiredIdempotencyKeys drops up to limit keys that expired before now.
	PurgeExpiredIdempotencyKeys(ctx context.Context, now time.Time, limit int) (int64, error)
	// CountRetentionCandidates counts, without changing anything, what a
	// pass with these cutoffs would archive and purge. Rows archived by the
	// pass and already older than purgeCutoff count as purged too, as the
	// pass would purge them right after moving them.
	CountRetentionCandidates(ctx context.Context, archiveCutoff, purgeCutoff, now time.Time) (RetentionCounts, error)
	// TryRetentionLock takes the lock that lets one daemon at a time run a
	// pass. ok is false when another daemon holds it.
	TryRetentionLock(ctx context.Context) (unlock func(), ok bool, err error)
}

// RetentionCounts is what a pass would move and purge.
type RetentionCounts struct {
	Archive, PurgeArchive, PurgeKeys int64
}

// Config is read at every pass.
type Config struct {
	Enabled          bool
	Interval         time.Duration
	Retention        time.Duration // RESOLVED/DEAD older than this are archived
	ArchiveRetention time.Duration // archived rows older than this are purged
	BatchSize        int
}

// Result is what one pass did.
type Result struct {
	Archived     int64
	PurgedDLQ    int64
	PurgedKeys   int64
	Batches      int
	DryRun       bool
	LongestBatch time.Duration
	Took         time.Duration
}

// ErrBusy means another daemon is running a pass right now.
var ErrBusy = fmt.Errorf("%w: another daemon is running a retention pass", derrors.ErrConflict)

// Scheduler runs retention passes.
type Scheduler struct {
	store    Store
	cfg      func() Config
	log      hclog.Logger
	now      func() time.Time
	periodic *periodic.Metrics
	archived prometheus.Counter
	purged   *prometheus.CounterVec
	batchDur prometheus.Histogram

	runMu  sync.Mutex // one pass at a time in this process
	loop   *periodic.Loop
	passes passLog
}

// New returns a scheduler; reg and p may be nil.
func New(store Store, cfg func() Config, log hclog.Logger, reg prometheus.Registerer, p *periodic.Metrics) *Scheduler {
	s := &Scheduler{
		store: store, cfg: cfg, log: log.Named("archive"), now: time.Now, periodic: p,
		archived: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lifecycled_archive_archived_total", Help: "Dead letters moved to the archive.",
		}),
		purged: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifecycled_archive_purged_total", Help: "Rows purged by retention: archived dead letters and expired idempotency keys.",
		}, []string{"kind"}),
		batchDur: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "lifecycled_archive_batch_duration_seconds", Help: "Duration of one archive or purge batch (one transaction).",
			Buckets: []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5},
		}),
	}
	s.purged.WithLabelValues("dlq_archive")
	s.purged.WithLabelValues("idempotency_keys")
	if reg != nil {
		reg.MustRegister(s.archived, s.purged, s.batchDur)
	}
	s.loop = periodic.NewLoop(periodic.Config{
		Name: "retention", Job: "archive", Log: s.log, Metrics: p, Pass: s.pass,
		Interval:   func() time.Duration { return s.cfg().Interval },
		FirstDelay: 10 * time.Second, // let the daemon settle before the first pass
	})
	return s
}

// Start runs a pass soon after start and then every interval.
func (s *Scheduler) Start(ctx context.Context) error { return s.loop.Start(ctx) }

// Stop ends the loop; a batch in progress finishes (it is one transaction).
func (s *Scheduler) Stop(ctx context.Context) error { return s.loop.Stop(ctx) }

// pass is the loop's scheduled pass: skipped while retention is off, and a
// success when another daemon is running it (the work is being done).
func (s *Scheduler) pass(ctx context.Context) (periodic.Outcome, error) {
	cfg := s.cfg()
	s.periodic.Interval("archive", cfg.Interval)
	if !cfg.Enabled {
		return periodic.Skipped, nil
	}
	res, err := s.run(ctx, "scheduled")
	switch {
	case errors.Is(err, ErrBusy):
		s.log.Debug("another daemon is running retention; skipping this pass")
		return periodic.Done, nil
	case err != nil:
		return periodic.Done, err
	}
	if res.Archived+res.PurgedDLQ+res.PurgedKeys > 0 {
		s.log.Info("retention pass", "archived", res.Archived, "purged_archive", res.PurgedDLQ,
			"purged_idempotency_keys", res.PurgedKeys, "longest_batch", res.LongestBatch.String(), "took", res.Took.String())
	}
	return periodic.Done, nil
}

// RunOnce runs one pass now. It returns ErrBusy when another daemon holds
// the retention lock.
func (s *Scheduler) RunOnce(ctx context.Context) (Result, error) { return s.run(ctx, "manual") }

// run runs a pass and remembers it (a pass another daemon was running is
// not one of ours).
func (s *Scheduler) run(ctx context.Context, trigger string) (Result, error) {
	start := s.now()
	res, err := s.runOnce(ctx)
	if !errors.Is(err, ErrBusy) {
		p := Pass{StartedAt: start, Trigger: trigger, Result: res}
		if err != nil {
			p.Err = err.Error()
		}
		s.passes.add(p)
	}
	return res, err
}

func (s *Scheduler) runOnce(ctx context.Context) (Result, error) {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	unlock, ok, err := s.store.TryRetentionLock(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("take retention lock: %w", err)
	}
	if !ok {
		return Result{}, ErrBusy
	}
	defer unlock()
	cfg := s.cfg()
	start := s.now()
	var res Result
	batches := func(kind string, fn func() (int64, error), total *int64) error {
		for ctx.Err() == nil {
			t := time.Now()
			n, err := fn()
			d := time.Since(t)
			s.batchDur.Observe(d.Seconds())
			if d > res.LongestBatch {
				res.LongestBatch = d
			}
			res.Batches++
			if err != nil {
				return fmt.Errorf("%s: %w", kind, err)
			}
			*total += n
			switch kind {
			case "archive":
				s.archived.Add(float64(n))
			default:
				s.purged.WithLabelValues(kind).Add(float64(n))
			}
			if n < int64(cfg.BatchSize) {
				return nil
			}
		}
		return ctx.Err()
	}
	now := s.now()
	if err := batches("archive", func() (int64, error) {
		return s.store.ArchiveDLQBatch(ctx, now.Add(-cfg.Retention), cfg.BatchSize)
	}, &res.Archived); err != nil {
		return res, err
	}
	if err := batches("dlq_archive", func() (int64, error) {
		return s.store.PurgeDLQArchiveBatch(ctx, now.Add(-cfg.ArchiveRetention), cfg.BatchSize)
	}, &res.PurgedDLQ); err != nil {
		return res, err
	}
	if err := batches("idempotency_keys", func() (int64, error) {
		return s.store.PurgeExpiredIdempotencyKeys(ctx, now, cfg.BatchSize)
	}, &res.PurgedKeys); err != nil {
		return res, err
	}
	res.Took = s.now().Sub(start)
	return res, nil
}

// DryRun counts what RunOnce would archive and purge now, and changes
// nothing. It takes no lock: a pass running meanwhile makes the counts
// smaller, never wrong about what is eligible.
func (s *Scheduler) DryRun(ctx context.Context) (Result, error) {
	cfg := s.cfg()
	now := s.now()
	c, err := s.store.CountRetentionCandidates(ctx, now.Add(-cfg.Retention), now.Add(-cfg.ArchiveRetention), now)
	if err != nil {
		return Result{}, fmt.Errorf("count retention candidates: %w", err)
	}
	return Result{Archived: c.Archive, PurgedDLQ: c.PurgeArchive, PurgedKeys: c.PurgeKeys, DryRun: true, Took: s.now().Sub(now)}, nil
}

// WithClock replaces the clock, for tests of retention boundaries.
func (s *Scheduler) WithClock(now func() time.Time) *Scheduler {
	s.now = now
	return s
}
