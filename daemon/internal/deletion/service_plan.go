package deletion

import (
	"context"
	"errors"
	"fmt"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
)

// Plan asks every configured deleter what it would delete for tenant now,
// and how. Deleters that cannot plan are unsupported, ones that fail are
// failed (and the plan then has no hash); neither is an error.
func (s *Service) Plan(ctx context.Context, tenant string) (*Plan, error) {
	tenant, err := s.canonical(tenant)
	if err != nil {
		return nil, err
	}
	p := s.reg.PlanAll(ctx, tenant)
	if len(p.Deleters) == 0 {
		return nil, fmt.Errorf("%w: no [[deleter]] is configured, so there is nothing to plan", derrors.ErrConflict)
	}
	// Stored so that a request or approval naming this hash later can be
	// told what changed; a plan read does not fail for it (the state store
	// may be down while the deleters answer).
	_ = s.savePlan(ctx, p)
	return p, nil
}

// savePlan stores a complete plan's shape under its hash, so that a job
// held to it, or an approval of it, can later be told what changed.
func (s *Service) savePlan(ctx context.Context, p *Plan) error {
	shape, ok := p.Shape()
	if !ok {
		return nil
	}
	return s.store.SavePlan(ctx, p.Hash, shape.Canonical(), s.now())
}

// planForJobs is the plan hash new jobs are held to: the plan of the first
// tenant (the shape is the same for every tenant; only counts differ). When
// the caller names the hash it saw, the current plan must be complete and
// have that hash. "" when no plan is complete and none was named: the
// runner adopts the first complete plan it computes.
func (s *Service) planForJobs(ctx context.Context, tenant, given string) (string, error) {
	if given != "" {
		if err := CheckPlanHash(given); err != nil {
			return "", err
		}
	}
	p := s.reg.PlanAll(ctx, tenant)
	if given != "" {
		if err := s.matchPlan(ctx, p, given); err != nil {
			return "", err
		}
	}
	if err := s.savePlan(ctx, p); err != nil {
		return "", err
	}
	return p.Hash, nil
}

// matchPlan checks that p is complete and has the hash the caller saw.
func (s *Service) matchPlan(ctx context.Context, p *Plan, given string) error {
	if !p.Complete() {
		return &PlanIncompleteError{Failed: p.Failed()}
	}
	if p.Hash == given {
		return nil
	}
	e := &PlanChangedError{Given: given, Current: p.Hash}
	if body, err := s.store.PlanBody(ctx, given); err == nil {
		if was, err := ParsePlanShape(given, body); err == nil {
			cur, _ := p.Shape()
			e.Drift = DescribeDrift(was, cur)
		}
	}
	return e
}

// ApproveOptions shape an approval.
type ApproveOptions struct {
	// PlanHash is the plan the approver saw; it must be the plan now.
	PlanHash string
	// UID is the approver's (peer credentials of the admin socket).
	UID *int64
}

// Approve approves the tenant's job that is AWAITING_APPROVAL, holding it
// to the plan the approver saw: the plan is computed again now and must
// have that hash. With approvers_distinct the approver's uid must differ
// from the requester's.
func (s *Service) Approve(ctx context.Context, tenant string, o ApproveOptions) (*Job, error) {
	tenant, err := s.canonical(tenant)
	if err != nil {
		return nil, err
	}
	if err := CheckPlanHash(o.PlanHash); err != nil {
		return nil, err
	}
	job, err := s.store.LatestDeletionJob(ctx, tenant)
	if errors.Is(err, derrors.ErrNotFound) {
		return nil, fmt.Errorf("%w: tenant %s has no deletion job to approve", derrors.ErrNotFound, tenant)
	}
	if err != nil {
		return nil, err
	}
	if job.Status != JobAwaitingApproval {
		return nil, notAwaiting(job)
	}
	if s.cfg().ApproversDistinct {
		if err := checkTwoPeople(job, o.UID); err != nil {
			return nil, err
		}
	}
	p := s.reg.PlanAll(ctx, tenant)
	if err := s.matchPlan(ctx, p, o.PlanHash); err != nil {
		return nil, err
	}
	if err := s.savePlan(ctx, p); err != nil {
		return nil, err
	}
	approved, err := s.store.ApproveDeletionJob(ctx, job.ID, p.Hash, o.UID, s.now())
	if err != nil {
		return nil, err
	}
	if s.runner != nil {
		s.runner.Kick()
	}
	return approved, nil
}

func notAwaiting(job *Job) error {
	return fmt.Errorf("%w: the latest deletion job of tenant %s (%s) is %s, not %s: there is nothing to approve",
		derrors.ErrConflict, job.TenantID, job.ID, job.Status, JobAwaitingApproval)
}
