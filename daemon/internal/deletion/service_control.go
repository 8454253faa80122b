package deletion

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
)

// Cancel cancels the tenant's unfinished job. One that no runner holds is
// CANCELLED at once; a RUNNING one is marked, and its runner stops its
// deleters at the next batch boundary and records it CANCELLED with what
// they deleted so far (at once when this daemon runs it, at its next
// heartbeat on another daemon). The job is returned as it is after the
// request: RUNNING with cancel_requested_at in the second case.
func (s *Service) Cancel(ctx context.Context, tenant string, uid *int64) (*Job, CancelOutcome, error) {
	tenant, err := s.canonical(tenant)
	if err != nil {
		return nil, 0, err
	}
	job, outcome, err := s.store.CancelDeletionJob(ctx, tenant, uid, s.now())
	if err != nil {
		return nil, 0, err
	}
	if outcome == CancelRequested && s.runner != nil {
		s.runner.interruptJob(job.ID, errCancelled)
	}
	return job, outcome, nil
}

// Retry makes the tenant's BLOCKED job (or PARTIAL one, waiting for its
// backoff) due now, its blocked deleters to be run again: the operator
// fixed what blocked them. A deleter still not configured, or failing for
// good again, blocks it again. The admin API logs who asked.
func (s *Service) Retry(ctx context.Context, tenant string) (*Job, error) {
	tenant, err := s.canonical(tenant)
	if err != nil {
		return nil, err
	}
	job, err := s.store.RetryDeletionJob(ctx, tenant, s.now())
	if err != nil {
		return nil, err
	}
	if s.runner != nil {
		s.runner.Kick()
	}
	return job, nil
}

// Hold puts the tenant under a legal hold. While it holds, no deletion
// starts, an unfinished job waits, and a running one is stopped at the
// next batch boundary (PARTIAL, resumed after the release). Holding a held
// tenant again with the same reason returns its hold (created false); with
// another reason it is a conflict: release it first.
func (s *Service) Hold(ctx context.Context, tenant, reason string, uid *int64) (*Hold, bool, error) {
	tenant, err := s.canonical(tenant)
	if err != nil {
		return nil, false, err
	}
	if reason, err = checkReason(reason); err != nil {
		return nil, false, err
	}
	hold, created, err := s.store.PlaceHold(ctx, tenant, reason, uid, s.now())
	if err != nil {
		return nil, false, err
	}
	if !created && hold.Reason != reason {
		return nil, false, fmt.Errorf("%w: tenant %s is already on hold since %s for another reason (%q); release it first to hold it for this one",
			derrors.ErrConflict, tenant, hold.HeldAt.UTC().Format(time.RFC3339), hold.Reason)
	}
	if created && s.runner != nil {
		s.runner.interruptTenant(tenant, errHeld)
	}
	return hold, created, nil
}

func checkReason(reason string) (string, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return "", fmt.Errorf("%w: reason: a hold needs a reason (the case or ticket that requires it)", derrors.ErrInvalid)
	}
	if p := textProblem(reason, MaxHoldReasonLength); p != "" {
		return "", fmt.Errorf("%w: reason: %s", derrors.ErrInvalid, p)
	}
	return reason, nil
}

// Release ends the tenant's hold; its waiting job becomes due.
func (s *Service) Release(ctx context.Context, tenant string, uid *int64) (*Hold, error) {
	tenant, err := s.canonical(tenant)
	if err != nil {
		return nil, err
	}
	hold, err := s.store.ReleaseHold(ctx, tenant, uid, s.now())
	if err != nil {
		return nil, err
	}
	if s.runner != nil {
		s.runner.Kick()
	}
	return hold, nil
}

// HoldOf returns the tenant's active hold; derrors.ErrNotFound if none.
func (s *Service) HoldOf(ctx context.Context, tenant string) (*Hold, error) {
	return forTenant(s, tenant, func(t string) (*Hold, error) { return s.store.ActiveHold(ctx, t) })
}

// Holds lists holds newest first, one page at a time.
func (s *Service) Holds(ctx context.Context, f HoldFilter) (HoldPage, error) {
	holds, next, err := listPage(s, &f.Tenant, &f.Limit,
		func() ([]*Hold, error) { return s.store.ListHolds(ctx, f) },
		func(h *Hold) Cursor { return Cursor{At: h.HeldAt, ID: h.ID} })
	if err != nil {
		return HoldPage{}, err
	}
	return HoldPage{Holds: holds, Next: next}, nil
}
