package dlq

import (
	"context"
	"sync"
	"time"
)

// RetryLoop republishes due PENDING messages automatically (when [retry]
// enabled) and returns messages whose lease ended (their daemon died
// mid-retry) to PENDING. Due messages are claimed with FOR UPDATE SKIP
// LOCKED leases on PostgreSQL, so several daemons share the work.
type RetryLoop struct {
	svc      *Service
	interval func() time.Duration
	batch    int

	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// NewRetryLoop returns the loop; Start launches it.
func NewRetryLoop(svc *Service, interval func() time.Duration) *RetryLoop {
	return &RetryLoop{svc: svc, interval: interval, batch: 100}
}

// Start launches the loop.
func (l *RetryLoop) Start(context.Context) error {
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.done = cancel, make(chan struct{})
	go l.run(ctx)
	return nil
}

// Stop ends the loop after the batch in progress. Safe to call twice.
func (l *RetryLoop) Stop(ctx context.Context) error {
	if l.cancel == nil {
		return nil
	}
	l.once.Do(l.cancel)
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *RetryLoop) run(ctx context.Context) {
	defer close(l.done)
	for {
		if err := l.RunOnce(ctx); err != nil && ctx.Err() == nil {
			l.svc.log.Error("retry pass failed", "error", err)
		} else if err == nil {
			l.svc.metrics.markSuccess(jobRetry, l.interval())
		}
		if !sleepCtx(ctx, l.interval()) {
			return
		}
	}
}

// RunOnce releases expired leases and, when automatic retries are on,
// republishes every message that is due, a batch at a time.
func (l *RetryLoop) RunOnce(ctx context.Context) error {
	now := l.svc.now()
	if n, err := l.svc.store.ReleaseExpiredDLQLeases(ctx, now); err != nil {
		return err
	} else if n > 0 {
		l.svc.log.Warn("returned messages of an expired retry lease to PENDING", "count", n)
	}
	pol := l.svc.policy()
	if !pol.AutoRetry {
		return nil
	}
	for ctx.Err() == nil {
		now := l.svc.now()
		msgs, err := l.svc.store.ClaimDueDLQ(ctx, l.batch, Claim{Owner: l.svc.owner, Now: now, LeaseUntil: now.Add(pol.Lease)})
		if err != nil {
			return err
		}
		if len(msgs) == 0 {
			return nil
		}
		if _, err := l.svc.republish(ctx, msgs, TriggerAuto); err != nil {
			return err
		}
		if len(msgs) < l.batch {
			return nil
		}
	}
	return ctx.Err()
}
