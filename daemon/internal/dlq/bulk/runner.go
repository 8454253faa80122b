package bulk

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/leased"
	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
)

// Config is how the runner runs bulk operations, read at every
// pass so a reload applies.
type Config struct {
	PollInterval time.Duration // how often it looks for operations to take
	Lease        time.Duration // how long a daemon holds an operation between renewals
	MaxRunning   int           // operations one daemon runs at once
}

// Why an operation's run stopped before its set was done.
var (
	errOperationCancelled = errors.New("operation cancelled")
	errOperationLeaseLost = errors.New("operation lease lost to another daemon")
	errOperationShutdown  = errors.New("daemon shutting down")
)

// Runner takes RUNNING bulk operations from the store (new ones,
// and those a stopped or dead daemon left) and runs them, a page at a
// time, under a lease it renews.
type Runner struct {
	svc  *Service
	cfg  func() Config
	loop *periodic.Loop
	runs leased.Runs[struct{}]
}

// NewRunner returns the runner of svc's operations; Start
// launches it.
func NewRunner(svc *Service, cfg func() Config, pm *periodic.Metrics) *Runner {
	r := &Runner{svc: svc, cfg: cfg}
	r.loop = periodic.NewLoop(periodic.Config{
		Name: "operations", Job: "dlq_operations", Log: svc.log, Metrics: pm,
		Interval: func() time.Duration { return cfg().PollInterval },
		Pass:     r.pass,
	})
	svc.runner = r
	return r
}

// Start launches the loop: a pass now (operations a restart left are
// taken at once), then one every poll interval.
func (r *Runner) Start(ctx context.Context) error {
	r.runs.Open(ctx)
	return r.loop.Start(ctx)
}

// Stop ends the loop, lets each operation finish the page in flight and
// hands it back for the next start (or another daemon). Safe to call twice.
func (r *Runner) Stop(ctx context.Context) error {
	err := r.loop.Stop(ctx)
	if cerr := r.runs.Close(ctx, errOperationShutdown); cerr != nil {
		return cerr
	}
	return err
}

// Running is how many operations the runner runs now.
func (r *Runner) Running() int { return r.runs.Len() }

// Kick looks for work now (an operation was just created).
func (r *Runner) Kick() { r.loop.Kick() }

func (r *Runner) interrupt(id uuid.UUID) { r.runs.Stop(id, errOperationCancelled) }

func (r *Runner) pass(ctx context.Context) (periodic.Outcome, error) {
	cfg := r.cfg()
	claimed := 0
	for r.runs.Len() < max(cfg.MaxRunning, 1) && ctx.Err() == nil {
		now := r.svc.mgr.Now()
		op, err := r.claim(ctx, now, now.Add(cfg.Lease))
		r.svc.signals.Polled.Signal(polled(now, op, err))
		if err != nil || op == nil {
			if claimed > 0 {
				return periodic.More, err
			}
			return periodic.Done, err
		}
		if !r.spawn(op, cfg) {
			r.svc.releaseOperation(op.ID)
			break
		}
		claimed++
	}
	if claimed > 0 {
		return periodic.More, nil
	}
	return periodic.Done, nil
}

// claim takes the next operation to run, if any; a stop does not cut it
// short (leased.ClaimContext).
func (r *Runner) claim(ctx context.Context, now, leaseUntil time.Time) (*dlq.Operation, error) {
	ctx, cancel := leased.ClaimContext(ctx)
	defer cancel()
	return r.svc.store.ClaimDLQOperation(ctx, r.svc.mgr.Owner(), now, leaseUntil)
}

// spawn runs op in the background; false when the runner is stopping.
// When our own run's lease lapsed and this claim renewed it, that run goes
// on: a second one would act on the same pages.
func (r *Runner) spawn(op *dlq.Operation, cfg Config) bool {
	return r.runs.Start(op.ID, struct{}{}, func(ctx context.Context, stop context.CancelCauseFunc) {
		_ = r.svc.runOperation(ctx, stop, op, cfg.Lease) // an outage is logged; the lease spaces the next try
	}, func() {
		r.svc.signals.RunEnded.Signal(op.ID)
		r.loop.Kick()
	}) != leased.Closed
}
