package dlq

import (
	"context"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
)

// RetryLoop republishes due PENDING messages automatically (when [retry]
// enabled) and returns messages whose lease ended (their daemon died
// mid-retry) to PENDING. Due messages are claimed with FOR UPDATE SKIP
// LOCKED leases on PostgreSQL, so several daemons share the work.
type RetryLoop struct {
	svc   *Service
	batch int
	loop  *periodic.Loop
}

// NewRetryLoop returns the loop; Start launches it.
func NewRetryLoop(svc *Service, interval func() time.Duration) *RetryLoop {
	l := &RetryLoop{svc: svc, batch: 100}
	l.loop = periodic.NewLoop(periodic.Config{
		Name: "retry", Job: string(jobRetry), Interval: interval, Log: svc.log, Metrics: svc.metrics.periodic,
		Pass: func(ctx context.Context) (periodic.Outcome, error) { return periodic.Done, l.RunOnce(ctx) },
	})
	return l
}

// Start launches the loop: a pass now, then one every interval.
func (l *RetryLoop) Start(ctx context.Context) error { return l.loop.Start(ctx) }

// Stop ends the loop after the batch in progress. Safe to call twice.
func (l *RetryLoop) Stop(ctx context.Context) error { return l.loop.Stop(ctx) }

// RunOnce releases expired leases and, when automatic retries are on,
// republishes every message that is due, a batch at a time.
func (l *RetryLoop) RunOnce(ctx context.Context) error {
	now := l.svc.now()
	if n, err := l.svc.store.ReleaseExpiredDLQLeases(ctx, now, l.svc.sending()); err != nil {
		return err
	} else if n > 0 {
		l.svc.log.Warn("returned messages of an expired retry lease to PENDING", "count", n)
	}
	// A failed backfill must not hold up automatic retries: it is tried
	// again on the next pass.
	if err := l.svc.backfillGroups(ctx); err != nil && ctx.Err() == nil {
		l.svc.log.Warn("could not give failure groups to messages stored before they existed; trying again next pass", "error", err)
	}
	pol := l.svc.policy()
	if !pol.AutoRetry {
		return nil
	}
	skip, err := l.svc.disabledTopics(ctx, pol)
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		now := l.svc.now()
		// Only the configured sources' messages: one whose source was
		// renamed or removed could only be handed back, uncounted, on
		// every pass (Topics and the metrics say they are waiting).
		claim := Claim{Owner: l.svc.owner, Now: now, LeaseUntil: now.Add(pol.Lease),
			Sources: l.svc.sources.SourceNames(), SkipTopics: skip}
		msgs, err := l.svc.store.ClaimDueDLQ(ctx, l.batch, claim)
		if err != nil {
			return err
		}
		if len(msgs) == 0 {
			return nil
		}
		if _, err := l.svc.republish(ctx, msgs, claim, TriggerAuto, nil); err != nil {
			return err
		}
		if len(msgs) < l.batch {
			return nil
		}
	}
	return ctx.Err()
}
