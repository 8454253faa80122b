package bulk

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// RetryAllResult is what POST /api/v1/dlq/{topic}/retry-all reports.
type RetryAllResult struct {
	Retried     int // acknowledged by the broker: RESOLVED
	Failed      int // refused by the broker: counted
	Unavailable int // not attempted: source unavailable; still PENDING
	// NotRecorded were acknowledged by the broker, but their claim had run
	// out by then: not RESOLVED, whatever state they are in now.
	NotRecorded int
}

// RetryAll republishes every PENDING message of a topic (its DLQ topic or
// its original topic), oldest first, as a bulk retry operation that this
// request runs itself: it holds the operation's lease from the start, so
// no runner takes it while the request waits. The set is fixed when it
// starts; a message that is not retryable when its turn comes is skipped,
// and a failed one is not retried again within the same call. A request
// that goes away cancels the operation between two pages; a daemon that
// dies leaves it to be resumed where it stopped.
func (s *Service) RetryAll(ctx context.Context, topic string) (RetryAllResult, error) {
	pol := s.mgr.Policy()
	now := s.mgr.Now()
	leaseUntil := now.Add(pol.Lease)
	f := dlq.OperationFilter{Search: dlq.SearchFilter{Topic: topic, Statuses: []dlq.Status{dlq.StatusPending}}}
	op, err := s.store.CreateDLQOperation(ctx, dlq.Operation{ID: uuid.New(), Action: dlq.ActionRetry, State: dlq.OperationRunning,
		Filter:    FilterJSON(map[string]any{"topic": topic, "status": []dlq.Status{dlq.StatusPending}, "retry_all": true}),
		CreatedAt: now, UpdatedAt: now, LeaseOwner: s.mgr.Owner(), LeaseExpiresAt: &leaseUntil, Outcomes: map[string]int64{}}, f)
	if err != nil {
		return RetryAllResult{}, err
	}
	run, stop := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stop(nil)
	go func() {
		select {
		case <-ctx.Done():
			stop(errOperationCancelled)
		case <-run.Done():
		}
	}()
	outage := s.runOperation(run, stop, op, pol.Lease)
	if outage != nil {
		// A retry-all is the request's: it ends with it, as it always did,
		// rather than going on by itself after a 503.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := s.store.FinishDLQOperation(wctx, op.ID, s.mgr.Owner(), dlq.OperationCancelled, outage.Error(), s.mgr.Now()); err != nil {
			s.log.Warn("end a retry-all stopped by an outage", "operation", op.ID.String(), "error", err)
		}
	}
	final, err := s.store.GetDLQOperation(context.WithoutCancel(ctx), op.ID)
	if err != nil {
		return RetryAllResult{}, err
	}
	res := RetryAllResult{Retried: int(final.Outcomes[dlq.ItemRetried]), Failed: int(final.Outcomes[dlq.ItemRefused]),
		Unavailable: int(final.Outcomes[dlq.ItemUnavailable]), NotRecorded: int(final.Outcomes[dlq.ItemNotRecorded])}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if outage != nil {
		// What was not sent stays PENDING, nothing counted: unavailable.
		res.Unavailable += int(final.Matched - final.Done)
		if errors.Is(outage, derrors.ErrUnavailable) {
			return res, fmt.Errorf("%w: no source could republish the retryable messages of %s; %d stay PENDING",
				derrors.ErrUnavailable, topic, res.Unavailable)
		}
		return res, outage
	}
	if !final.Finished() {
		return res, fmt.Errorf("%w: retry-all stopped before its end (operation %s resumes later): %s", derrors.ErrUnavailable, op.ID, final.LastError)
	}
	if res.Retried == 0 && res.Unavailable > 0 {
		return res, fmt.Errorf("%w: no source could republish the %d retryable messages of %s; they stay PENDING",
			derrors.ErrUnavailable, res.Unavailable, topic)
	}
	return res, nil
}
