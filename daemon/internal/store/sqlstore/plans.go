package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
)

// JobStatusExpr is a job's status as the API shows it: a job waiting for
// approval is stored as SCHEDULED with approval_pending set (see
// migration 012) and read as AWAITING_APPROVAL.
const JobStatusExpr = `CASE WHEN approval_pending AND status = 'SCHEDULED' THEN 'AWAITING_APPROVAL' ELSE status END`

// PlanSQL is the SQL of deletion.ApprovalStore in one dialect
// (postgres/plans.go, sqlite/plans.go).
type PlanSQL struct {
	OnCreate string // (job id, plan hash or "", approval required): right after the job is inserted
	Save     string // (hash, body, now); stored once
	Body     string // (hash) -> body
	Approve  string // (job id, plan hash, uid, now)
	Await    string // (job id, owner, drift, now)
	Adopt    string // (job id, owner, plan hash)
}

// holdToPlan gives a job created in the transaction q its plan and, under
// require_approval, sends it to AWAITING_APPROVAL.
func (s *Store) holdToPlan(ctx context.Context, q Querier, id uuid.UUID, req deletion.JobRequest) error {
	if req.PlanHash == "" && !req.RequireApproval {
		return nil
	}
	if _, err := q.Exec(ctx, s.sql.Plans.OnCreate, id, req.PlanHash, req.RequireApproval); err != nil {
		return fmt.Errorf("hold deletion job to its plan: %w", err)
	}
	return nil
}

// SavePlan implements deletion.ApprovalStore.
func (s *Store) SavePlan(ctx context.Context, hash string, body []byte, now time.Time) error {
	if _, err := s.conn.Exec(ctx, s.sql.Plans.Save, hash, string(body), now); err != nil {
		return fmt.Errorf("store plan %s: %w", hash, err)
	}
	return nil
}

// PlanBody implements deletion.ApprovalStore.
func (s *Store) PlanBody(ctx context.Context, hash string) ([]byte, error) {
	var body string
	if err := s.conn.QueryRow(ctx, s.sql.Plans.Body, hash).Scan(&body); err != nil {
		return nil, fmt.Errorf("plan %s: %w", hash, err)
	}
	return []byte(body), nil
}

// ApproveDeletionJob implements deletion.ApprovalStore.
func (s *Store) ApproveDeletionJob(ctx context.Context, id uuid.UUID, planHash string, uid *int64, now time.Time) (*deletion.Job, error) {
	var job *deletion.Job
	err := s.conn.Tx(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, s.sql.Plans.Approve, id, planHash, uid, now)
		if err != nil {
			return err
		}
		job, err = s.withDeleters(ctx, q, q.QueryRow(ctx, s.sql.Jobs.ByID, id))
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
func (s *Store) AwaitApproval(ctx context.Context, id uuid.UUID, owner, drift string, now time.Time) error {
	n, err := s.conn.Exec(ctx, s.sql.Plans.Await, id, owner, drift, now)
	if err != nil {
		return fmt.Errorf("send deletion job back for approval: %w", err)
	}
	return leaseHeld(n, id)
}

// AdoptPlan implements deletion.ApprovalStore.
func (s *Store) AdoptPlan(ctx context.Context, id uuid.UUID, owner, planHash string) error {
	n, err := s.conn.Exec(ctx, s.sql.Plans.Adopt, id, owner, planHash)
	if err != nil {
		return fmt.Errorf("hold deletion job to its plan: %w", err)
	}
	return leaseHeld(n, id)
}
