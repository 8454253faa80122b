package bulk

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/leased"
	"golang.org/x/time/rate"
)

// runOperation runs op, which this daemon holds, until its set is done, it
// is cancelled, the daemon stops or the lease is lost. ctx ends with the
// reason; the page in flight always completes, so a stop falls between
// two pages and what was done is recorded. It returns the outage that
// stopped it, if one did: the operation is then still RUNNING under this
// daemon's lease, to be resumed when the lease runs out.
func (s *Service) runOperation(ctx context.Context, stop context.CancelCauseFunc, op *dlq.Operation, lease time.Duration) error {
	log := s.log.With("operation", op.ID.String(), "action", op.Action)
	endHeartbeat := leased.Heartbeat(ctx, func(life context.Context) { s.operationHeartbeat(life, op.ID, lease, stop) })
	defer endHeartbeat()

	record := func(state dlq.OperationState, msg string) {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := s.store.FinishDLQOperation(wctx, op.ID, s.mgr.Owner(), state, msg, s.mgr.Now()); err != nil {
			log.Error("record the end of a bulk operation", "state", state, "error", err)
			return
		}
		log.Info("bulk operation ended", "state", state, "error", msg)
	}
	if op.CancelRequestedAt != nil {
		record(dlq.OperationCancelled, "")
		return nil
	}
	size := pageSize(op)
	if s.pageCap > 0 {
		size = min(size, s.pageCap)
	}
	var limiter *rate.Limiter
	if op.Rate > 0 {
		limiter = rate.NewLimiter(rate.Limit(op.Rate), size)
	}
	var (
		completed bool
		err       error
	)
	if op.Action == dlq.ActionRetry {
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
		record(dlq.OperationCompleted, "")
		return nil
	}
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errOperationCancelled):
		record(dlq.OperationCancelled, "")
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
func (s *Service) walkPages(ctx context.Context, op *dlq.Operation, pos int64, size int, limiter *rate.Limiter) (bool, error) {
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
	switch err := s.store.ReleaseDLQOperation(ctx, id, s.mgr.Owner()); {
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
		err := s.store.RenewDLQOperationLease(life, id, s.mgr.Owner(), s.mgr.Now().Add(lease))
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

// InFlightAtMost is how many of op's messages a run may have under way
// at once (sent or being sent, their outcomes not yet recorded): what a
// cancel waits for, since a run stops only after the pages under way are
// recorded. It leaves out the pageCap tests set.
func InFlightAtMost(op *dlq.Operation) int {
	if op.Action == dlq.ActionRetry {
		return retryWorkers * pageSize(op)
	}
	return pageSize(op)
}

// pageSize is how many messages a page takes: large when nothing limits
// the rate (fewer round trips), about a fifth of a second's worth when
// something does, so the rate is even and a cancel soon felt.
func pageSize(op *dlq.Operation) int {
	if op.Rate <= 0 {
		if op.Action == dlq.ActionReplayTo {
			return 100
		}
		return 250
	}
	return min(max(int(op.Rate/5), 1), 250)
}
