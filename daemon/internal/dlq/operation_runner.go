package dlq

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"golang.org/x/time/rate"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/leased"
	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
)

// OperationConfig is how the runner runs bulk operations, read at every
// pass so a reload applies.
type OperationConfig struct {
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

// OperationRunner takes RUNNING bulk operations from the store (new ones,
// and those a stopped or dead daemon left) and runs them, a page at a
// time, under a lease it renews.
type OperationRunner struct {
	svc  *Service
	cfg  func() OperationConfig
	loop *periodic.Loop
	runs leased.Runs[struct{}]
}

// NewOperationRunner returns the runner of svc's operations; Start
// launches it.
func NewOperationRunner(svc *Service, cfg func() OperationConfig) *OperationRunner {
	r := &OperationRunner{svc: svc, cfg: cfg}
	r.loop = periodic.NewLoop(periodic.Config{
		Name: "operations", Job: string(jobOperations), Log: svc.log, Metrics: svc.metrics.periodic,
		Interval: func() time.Duration { return cfg().PollInterval },
		Pass:     r.pass,
	})
	svc.operations = r
	return r
}

// Start launches the loop: a pass now (operations a restart left are
// taken at once), then one every poll interval.
func (r *OperationRunner) Start(ctx context.Context) error {
	r.runs.Open(ctx)
	return r.loop.Start(ctx)
}

// Stop ends the loop, lets each operation finish the page in flight and
// hands it back for the next start (or another daemon). Safe to call twice.
func (r *OperationRunner) Stop(ctx context.Context) error {
	err := r.loop.Stop(ctx)
	if cerr := r.runs.Close(ctx, errOperationShutdown); cerr != nil {
		return cerr
	}
	return err
}

// Kick looks for work now (an operation was just created).
func (r *OperationRunner) Kick() { r.loop.Kick() }

func (r *OperationRunner) interrupt(id uuid.UUID) { r.runs.Stop(id, errOperationCancelled) }

func (r *OperationRunner) pass(ctx context.Context) (periodic.Outcome, error) {
	cfg := r.cfg()
	claimed := 0
	for r.runs.Len() < max(cfg.MaxRunning, 1) && ctx.Err() == nil {
		now := r.svc.now()
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
func (r *OperationRunner) claim(ctx context.Context, now, leaseUntil time.Time) (*Operation, error) {
	ctx, cancel := leased.ClaimContext(ctx)
	defer cancel()
	return r.svc.store.ClaimDLQOperation(ctx, r.svc.owner, now, leaseUntil)
}

// spawn runs op in the background; false when the runner is stopping.
// When our own run's lease lapsed and this claim renewed it, that run goes
// on: a second one would act on the same pages.
func (r *OperationRunner) spawn(op *Operation, cfg OperationConfig) bool {
	return r.runs.Start(op.ID, struct{}{}, func(ctx context.Context, stop context.CancelCauseFunc) {
		_ = r.svc.runOperation(ctx, stop, op, cfg.Lease) // an outage is logged; the lease spaces the next try
	}, func() {
		r.svc.signals.RunEnded.Signal(op.ID)
		r.loop.Kick()
	}) != leased.Closed
}

// runOperation runs op, which this daemon holds, until its set is done, it
// is cancelled, the daemon stops or the lease is lost. ctx ends with the
// reason; the page in flight always completes, so a stop falls between
// two pages and what was done is recorded. It returns the outage that
// stopped it, if one did: the operation is then still RUNNING under this
// daemon's lease, to be resumed when the lease runs out.
func (s *Service) runOperation(ctx context.Context, stop context.CancelCauseFunc, op *Operation, lease time.Duration) error {
	log := s.log.With("operation", op.ID.String(), "action", op.Action)
	endHeartbeat := leased.Heartbeat(ctx, func(life context.Context) { s.operationHeartbeat(life, op.ID, lease, stop) })
	defer endHeartbeat()

	record := func(state OperationState, msg string) {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := s.store.FinishDLQOperation(wctx, op.ID, s.owner, state, msg, s.now()); err != nil {
			log.Error("record the end of a bulk operation", "state", state, "error", err)
			return
		}
		log.Info("bulk operation ended", "state", state, "error", msg)
	}
	if op.CancelRequestedAt != nil {
		record(OperationCancelled, "")
		return nil
	}
	size := pageSize(op)
	if s.bulkPageCap > 0 {
		size = min(size, s.bulkPageCap)
	}
	var limiter *rate.Limiter
	if op.Rate > 0 {
		limiter = rate.NewLimiter(rate.Limit(op.Rate), size)
	}
	var (
		completed bool
		err       error
	)
	if op.Action == ActionRetry {
		completed, err = s.retryPipeline(ctx, op, op.Position, size, limiter)
	} else {
		completed, err = s.walkPages(ctx, op, op.Position, size, limiter)
	}
	switch {
	case errors.Is(err, derrors.ErrLeaseLost):
		log.Warn("bulk operation lease lost to another daemon; leaving it to that one", "error", err)
		s.releaseOperation(op.ID)
		return nil
	case err != nil:
		// The store or the broker is out: the operation keeps its lease
		// until it runs out, which spaces the tries, and then a pass (here
		// or elsewhere) resumes it after its last recorded page.
		log.Warn("bulk operation stopped by an outage; it resumes after its lease", "error", err, "lease", lease.String())
		return err
	case completed:
		record(OperationCompleted, "")
		return nil
	}
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errOperationCancelled):
		record(OperationCancelled, "")
	case errors.Is(cause, errOperationLeaseLost):
		log.Warn("bulk operation lease lost to another daemon; leaving it to that one")
		s.releaseOperation(op.ID)
	default:
		s.releaseOperation(op.ID)
	}
	return nil
}

// walkPages does a page at a time, in order, until the set is done
// (true) or ctx ends; the page in flight always completes.
func (s *Service) walkPages(ctx context.Context, op *Operation, pos int64, size int, limiter *rate.Limiter) (bool, error) {
	for ctx.Err() == nil {
		items, err := s.store.DLQOperationItems(ctx, op.ID, pos, size)
		if err != nil {
			if ctx.Err() != nil {
				return false, nil
			}
			return false, err
		}
		if len(items) == 0 {
			return true, nil
		}
		items, next := undone(items, op.DoneRanges)
		if len(items) == 0 {
			pos = next
			continue
		}
		if limiter != nil && limiter.WaitN(ctx, len(items)) != nil {
			return false, nil
		}
		// The page runs to its end whatever happens to ctx.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		err = s.operationPage(pctx, ctx, op, items)
		cancel()
		if err != nil {
			return false, err
		}
		pos = next
	}
	return false, nil
}

// releaseOperation hands an operation back so it is taken again at once,
// if this daemon holds it. A run that ends on a lost lease hands it back
// too: this daemon's runner may have taken the operation back while the
// run finished its page (the other daemon stopped, or stalled past its
// own lease), and the runner does not start a second run of an operation
// it runs; without the hand-back the operation would wait, RUNNING with
// no run, for that lease to run out. Held by another daemon, it is left.
func (s *Service) releaseOperation(id uuid.UUID) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	switch err := s.store.ReleaseDLQOperation(ctx, id, s.owner); {
	case err == nil:
		s.log.Info("bulk operation handed back", "operation", id.String())
	case errors.Is(err, derrors.ErrLeaseLost):
		s.log.Info("bulk operation not handed back: this daemon no longer holds it", "operation", id.String())
	default:
		s.log.Warn("hand back a bulk operation", "operation", id.String(), "error", err)
	}
}

// operationHeartbeat renews the lease until life ends and stops the run
// when the lease is lost or a cancel was asked (on any daemon). After a
// stop it goes on renewing while the run records its end.
func (s *Service) operationHeartbeat(life context.Context, id uuid.UUID, lease time.Duration, stop context.CancelCauseFunc) {
	t := time.NewTicker(max(lease/3, time.Millisecond))
	defer t.Stop()
	stopped := false
	for {
		select {
		case <-life.Done():
			return
		case <-t.C:
		}
		err := s.store.RenewDLQOperationLease(life, id, s.owner, s.now().Add(lease))
		if errors.Is(err, derrors.ErrLeaseLost) {
			s.log.Warn("bulk operation lease lost; its run stops after the pages under way", "operation", id.String())
			stop(errOperationLeaseLost)
			s.signals.LeaseLost.Signal(id)
			return
		}
		if err != nil || stopped {
			continue
		}
		if cancelled, err := s.store.DLQOperationCancelRequested(life, id); err == nil && cancelled {
			stop(errOperationCancelled)
			stopped = true
		}
	}
}

// pageSize is how many messages a page takes: large when nothing limits
// the rate (fewer round trips), about a fifth of a second's worth when
// something does, so the rate is even and a cancel soon felt.
func pageSize(op *Operation) int {
	if op.Rate <= 0 {
		if op.Action == ActionReplayTo {
			return 100
		}
		return 250
	}
	return min(max(int(op.Rate/5), 1), 250)
}
