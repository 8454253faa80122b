package periodic

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Outcome is what a pass tells its loop about what comes next.
type Outcome int

const (
	// Done: the pass succeeded; the next one comes after the interval.
	Done Outcome = iota
	// More: the pass succeeded and there may be more work: the next pass
	// starts at once.
	More
	// Skipped: the pass did nothing by choice (the job is disabled): no
	// success is recorded, the next pass comes after the interval.
	Skipped
)

// Pass is one run of a loop's work. A pass returns when its work is done or
// ctx ends; an error means the pass failed (it is logged, and no success is
// recorded).
type Pass func(ctx context.Context) (Outcome, error)

// Config describes a Loop.
type Config struct {
	// Name is what the error log calls a pass: "<Name> pass failed".
	Name string
	// Job labels the success metrics; "" records none (the work records
	// its own).
	Job string
	// Interval is read after every pass: the wait before the next one.
	Interval func() time.Duration
	// FirstDelay is the wait before the first pass (0: at once).
	FirstDelay time.Duration
	// Timeout, when set and above zero, bounds each pass.
	Timeout func() time.Duration
	Pass    Pass
	Log     hclog.Logger
	Metrics *Metrics // nil: none
}

// Loop runs a Pass one at a time: at start (after FirstDelay), then after
// every Interval or Kick, until Stop. A failed pass is logged unless it
// failed because the loop is stopping: a shutdown is not an error.
type Loop struct {
	cfg  Config
	kick chan struct{}

	mu     sync.Mutex
	cancel context.CancelFunc // nil when not running
	done   chan struct{}
	next   time.Time // when the current wait ends; zero during a pass
}

// NewLoop returns a loop; Start launches it.
func NewLoop(cfg Config) *Loop {
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	return &Loop{cfg: cfg, kick: make(chan struct{}, 1)}
}

// Start launches the loop in the background. The loop outlives ctx (a start
// context ends when start-up is over) but keeps its values. Starting a
// running loop does nothing.
func (l *Loop) Start(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.cancel, l.done = cancel, make(chan struct{})
	go l.run(ctx, l.done)
	return nil
}

// Stop cancels the pass in progress and waits until it has returned, or
// until ctx ends (then it returns ctx's error and the loop ends later on its
// own). Stopping a loop that is not running, or stopping twice, is fine; a
// stopped loop may be started again.
func (l *Loop) Stop(ctx context.Context) error {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	l.mu.Lock()
	if l.done == done {
		l.cancel, l.done = nil, nil
	}
	l.mu.Unlock()
	return nil
}

// Kick ends the current wait: the next pass starts now. A kick during a
// pass is remembered, and several kicks make one pass.
func (l *Loop) Kick() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

func (l *Loop) run(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	if !l.wait(ctx, l.cfg.FirstDelay) {
		return
	}
	for {
		outcome, err := l.pass(ctx)
		interval := l.cfg.Interval()
		switch {
		case err != nil:
			if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
				l.cfg.Log.Error(l.cfg.Name+" pass failed", "error", err)
			}
		case outcome != Skipped && l.cfg.Job != "":
			l.cfg.Metrics.Success(l.cfg.Job, interval)
		}
		if err == nil && outcome == More && ctx.Err() == nil {
			continue
		}
		if !l.wait(ctx, interval) {
			return
		}
	}
}

func (l *Loop) pass(ctx context.Context) (Outcome, error) {
	if l.cfg.Timeout != nil {
		if d := l.cfg.Timeout(); d > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
	}
	return l.cfg.Pass(ctx)
}

// Next is when the next pass is due: zero while a pass runs or the loop
// is not running (operators see it on the console's retention page).
func (l *Loop) Next() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next
}

// wait waits d or a kick; false when the loop is stopping.
func (l *Loop) wait(ctx context.Context, d time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	if d <= 0 {
		return true
	}
	l.mu.Lock()
	l.next = time.Now().Add(d)
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.next = time.Time{}
		l.mu.Unlock()
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-l.kick:
		return true
	case <-t.C:
		return true
	}
}
