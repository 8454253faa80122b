package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
)

// jobStatusExpr is a job's status as the API shows it: a job waiting for
// approval is stored as SCHEDULED with approval_pending set (see
// migrations postgres 012 / sqlite 010) and read as AWAITING_APPROVAL.
const jobStatusExpr = `CASE WHEN approval_pending AND status = 'SCHEDULED' THEN 'AWAITING_APPROVAL' ELSE status END`

// planSQL is the SQL of deletion.ApprovalStore in one dialect
// (postgres_plans.go, sqlite_plans.go).
type planSQL struct {
	onCreate string // (job id, plan hash or "", approval required): right after the job is inserted
	save     string // (hash, body, now); stored once
	body     string // (hash) -> body
	approve  string // (job id, plan hash, uid, now)
	await    string // (job id, owner, drift, now)
	adopt    string // (job id, owner, plan hash)
}

// holdToPlan gives a job created in the transaction q its plan and, under
// require_approval, sends it to AWAITING_APPROVAL.
func (s *sqlStore) holdToPlan(ctx context.Context, q querier, id uuid.UUID, req deletion.JobRequest) error {
	if req.PlanHash == "" && !req.RequireApproval {
		return nil
	}
	if _, err := q.exec(ctx, s.sql.plans.onCreate, id, req.PlanHash, req.RequireApproval); err != nil {
		return fmt.Errorf("hold deletion job to its plan: %w", err)
	}
	return nil
}

// SavePlan implements deletion.ApprovalStore.
func (s *sqlStore) SavePlan(ctx context.Context, hash string, body []byte, now time.Time) error {
	if _, err := s.db.exec(ctx, s.sql.plans.save, hash, string(body), now); err != nil {
		return fmt.Errorf("store plan %s: %w", hash, err)
	}
	return nil
}

// PlanBody implements deletion.ApprovalStore.
func (s *sqlStore) PlanBody(ctx context.Context, hash string) ([]byte, error) {
	var body string
	if err := s.db.queryRow(ctx, s.sql.plans.body, hash).Scan(&body); err != nil {
		return nil, fmt.Errorf("plan %s: %w", hash, err)
	}
	return []byte(body), nil
}

// ApproveDeletionJob implements deletion.ApprovalStore.
func (s *sqlStore) ApproveDeletionJob(ctx context.Context, id uuid.UUID, planHash string, uid *int64, now time.Time) (*deletion.Job, error) {
	var job *deletion.Job
	err := s.db.tx(ctx, func(q querier) error {
		n, err := q.exec(ctx, s.sql.plans.approve, id, planHash, uid, now)
		if err != nil {
			return err
		}
		job, err = s.withDeleters(ctx, q, q.queryRow(ctx, s.sql.jobs.byID, id))
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: deletion job %s of tenant %s is %s, not %s (it changed meanwhile): there is nothing to approve",
				derrors.ErrConflict, id, job.TenantID, job.Status, deletion.JobAwaitingApproval)
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, derrors.ErrConflict) {
			return nil, err
		}
		return nil, fmt.Errorf("approve deletion job %s: %w", id, err)
	}
	return job, nil
}

// AwaitApproval implements deletion.ApprovalStore.
func (s *sqlStore) AwaitApproval(ctx context.Context, id uuid.UUID, owner, drift string, now time.Time) error {
	n, err := s.db.exec(ctx, s.sql.plans.await, id, owner, drift, now)
	if err != nil {
		return fmt.Errorf("send deletion job back for approval: %w", err)
	}
	return leaseHeld(n, id)
}

// AdoptPlan implements deletion.ApprovalStore.
func (s *sqlStore) AdoptPlan(ctx context.Context, id uuid.UUID, owner, planHash string) error {
	n, err := s.db.exec(ctx, s.sql.plans.adopt, id, owner, planHash)
	if err != nil {
		return fmt.Errorf("hold deletion job to its plan: %w", err)
	}
	return leaseHeld(n, id)
}
