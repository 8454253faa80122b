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

// JobSQL is the SQL of deletion.JobStore in one dialect
// (postgres/deletion.go, sqlite/deletion.go).
type JobSQL struct {
	Create      string // a job unless the tenant has an active one: (id, tenant, status, now, next attempt, not_before, uid)
	AddDeleter  string // (job id, deleter, now)
	Active      string // the tenant's job that is not finished: (tenant)
	Latest      string // (tenant)
	ByID        string // (id)
	ClaimLock   string // run before claim in its transaction; "" for none
	Claim       string // one due job: (now, owner, lease until, max jobs or 0)
	Renew       string // (id, owner, lease until)
	Control     string // (id) -> cancel requested, held
	SetDeleter  string // (id, owner, name, status, deleted, attempts, error, updated_at, total, breakdown, verification)
	Finish      string // (id, owner, status, verified, last error, next attempt, now) -> status
	DeletersFor string // (job id)
	// DeletersOf reads the deleters of many jobs: (JSON array of job ids).
	DeletersOf    string
	List          string // (tenant or "", JSON array of statuses, created after, created before, cursor time, cursor id, limit)
	CancelNow     string // (tenant, uid, now) -> id
	CancelRunning string // (job id, now): the deleters a dead runner left RUNNING
	CancelRequest string // (tenant, uid, now) -> id
	RetryJob      string // (tenant, now) -> id
	RetryDeleters string // (job id, now)
	Reap          string // (now)
	StatusCounts  string
	Overdue       string // (now) -> oldest not_before
	HeldJobs      string
	ActiveHolds   string
}

// JobColumns is what every statement that returns a job selects, for
// scanJob, followed by whether the tenant is held (holdExpr in a SELECT
// from the jobs table named j, FALSE in a claim's RETURNING: a held
// tenant's job is never claimed); DeleterColumns likewise for a job's
// deleters.
const (
	JobColumns = `id, tenant_id, ` + JobStatusExpr + `, attempts, verified, COALESCE(last_error, ''), created_at, updated_at,
	finished_at, next_attempt_at, not_before, started_at, requested_by_uid, cancel_requested_at, cancelled_by_uid,
	COALESCE(plan_hash, ''), approval_required, approved_at, approved_by_uid, COALESCE(plan_drift, '')`
	DeleterColumns = `deleter, status, deleted_count, COALESCE(initial_count, -1), attempts, COALESCE(error, ''),
	updated_at, breakdown, verification`
)

func scanJob(row Scanner) (*deletion.Job, error) {
	var (
		j      deletion.Job
		status string
	)
	if err := row.Scan(&j.ID, &j.TenantID, &status, &j.Attempts, &j.Verified, &j.LastError, &j.CreatedAt,
		&j.UpdatedAt, &j.FinishedAt, &j.NextAttemptAt, &j.NotBefore, &j.StartedAt, &j.RequestedByUID,
		&j.CancelRequestedAt, &j.CancelledByUID, &j.PlanHash, &j.ApprovalRequired, &j.ApprovedAt, &j.ApprovedByUID,
		&j.PlanDrift, &j.OnHold); err != nil {
		return nil, err
	}
	j.Status = deletion.JobStatus(status)
	return &j, nil
}

func scanDeleter(row Scanner) (deletion.DeleterState, error) {
	var (
		d                       deletion.DeleterState
		status                  string
		breakdown, verification []byte
	)
	if err := row.Scan(&d.Name, &status, &d.DeletedCount, &d.Total, &d.Attempts, &d.Error, &d.UpdatedAt,
		&breakdown, &verification); err != nil {
		return d, err
	}
	d.Status = deletion.DeleterStatus(status)
	return d, decodeDeleterDetail(&d, breakdown, verification)
}

// withDeleters reads the deleters of the job a statement returned.
func (s *Store) withDeleters(ctx context.Context, q Querier, row Scanner) (*deletion.Job, error) {
	j, err := scanJob(row)
	if err != nil {
		return nil, err
	}
	if j.Deleters, err = QueryAll(ctx, q, scanDeleter, s.sql.Jobs.DeletersFor, j.ID); err != nil {
		return nil, fmt.Errorf("read deleters of job %s: %w", j.ID, err)
	}
	return j, nil
}

// CreateDeletionJob creates a PENDING job for tenant, or returns its active
// one (created false); a held tenant is refused with a deletion.OnHoldError.
func (s *Store) CreateDeletionJob(ctx context.Context, tenant string, deleters []string, now time.Time) (*deletion.Job, bool, error) {
	res, err := s.CreateDeletionJobs(ctx, []deletion.JobRequest{{Tenant: tenant}}, deleters, now)
	if err != nil {
		return nil, false, err
	}
	if res[0].Hold != nil {
		return nil, false, &deletion.OnHoldError{Hold: res[0].Hold}
	}
	return res[0].Job, res[0].Created, nil
}

// CreateDeletionJobs implements deletion.JobStore.
func (s *Store) CreateDeletionJobs(ctx context.Context, reqs []deletion.JobRequest, deleters []string, now time.Time) ([]deletion.JobCreated, error) {
	out := make([]deletion.JobCreated, len(reqs))
	err := s.conn.Tx(ctx, func(q Querier) error {
		for i, req := range reqs {
			hold, err := scanHold(q.QueryRow(ctx, s.sql.Holds.Active, req.Tenant))
			if err == nil {
				out[i] = deletion.JobCreated{Hold: hold}
				continue
			}
			if !errors.Is(err, derrors.ErrNotFound) {
				return fmt.Errorf("read hold of tenant %q: %w", req.Tenant, err)
			}
			status, next := deletion.JobPending, now
			var notBefore *time.Time
			if req.NotBefore != nil && req.NotBefore.After(now) {
				status, next, notBefore = deletion.JobScheduled, *req.NotBefore, req.NotBefore
			}
			id := newID()
			n, err := q.Exec(ctx, s.sql.Jobs.Create, id, req.Tenant, string(status), now, next, notBefore, req.UID)
			if err != nil {
				return fmt.Errorf("create deletion job: %w", err)
			}
			created := n == 1
			if created {
				if err := s.holdToPlan(ctx, q, id, req); err != nil {
					return err
				}
				for _, d := range deleters {
					if _, err := q.Exec(ctx, s.sql.Jobs.AddDeleter, id, d, now); err != nil {
						return fmt.Errorf("create deletion job: %w", err)
					}
				}
			}
			job, err := s.withDeleters(ctx, q, q.QueryRow(ctx, s.sql.Jobs.Active, req.Tenant))
			if err != nil {
				return err
			}
			out[i] = deletion.JobCreated{Job: job, Created: created}
		}
		return nil
	})
	return out, err
}

// LatestDeletionJob implements deletion.JobStore.
func (s *Store) LatestDeletionJob(ctx context.Context, tenant string) (*deletion.Job, error) {
	j, err := s.withDeleters(ctx, s.conn, s.conn.QueryRow(ctx, s.sql.Jobs.Latest, tenant))
	if err != nil {
		return nil, fmt.Errorf("deletion job for tenant %q: %w", tenant, err)
	}
	return j, nil
}

// ClaimDeletionJob implements deletion.JobStore. With a limit, claims are
// serialised (PostgreSQL: a transaction-scoped advisory lock taken before
// the claim statement, whose snapshot then sees every claim committed
// before it), so that two daemons counting live leases at once cannot
// both take the last slot.
func (s *Store) ClaimDeletionJob(ctx context.Context, owner string, now, leaseUntil time.Time, maxJobs int) (*deletion.Job, error) {
	var j *deletion.Job
	err := s.conn.Tx(ctx, func(q Querier) error {
		if maxJobs > 0 && s.sql.Jobs.ClaimLock != "" {
			if _, err := q.Exec(ctx, s.sql.Jobs.ClaimLock); err != nil {
				return err
			}
		}
		var err error
		j, err = s.withDeleters(ctx, q, q.QueryRow(ctx, s.sql.Jobs.Claim, now, owner, leaseUntil, maxJobs))
		return err
	})
	if errors.Is(err, derrors.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim deletion job: %w", err)
	}
	return j, nil
}

// RenewDeletionLease implements deletion.JobStore.
func (s *Store) RenewDeletionLease(ctx context.Context, id uuid.UUID, owner string, leaseUntil time.Time) error {
	n, err := s.conn.Exec(ctx, s.sql.Jobs.Renew, id, owner, leaseUntil)
	if err != nil {
		return fmt.Errorf("renew deletion lease: %w", err)
	}
	return leaseHeld(n, id)
}

// DeletionJobControl implements deletion.JobStore.
func (s *Store) DeletionJobControl(ctx context.Context, id uuid.UUID) (deletion.JobControl, error) {
	var c deletion.JobControl
	if err := s.conn.QueryRow(ctx, s.sql.Jobs.Control, id).Scan(&c.CancelRequested, &c.Held); err != nil {
		return c, fmt.Errorf("read control of deletion job %s: %w", id, err)
	}
	return c, nil
}

// SetDeleterState implements deletion.JobStore.
func (s *Store) SetDeleterState(ctx context.Context, id uuid.UUID, owner string, st deletion.DeleterState) error {
	breakdown, verification, err := encodeDeleterDetail(st)
	if err != nil {
		return err
	}
	n, err := s.conn.Exec(ctx, s.sql.Jobs.SetDeleter, id, owner, st.Name, string(st.Status), st.DeletedCount, st.Attempts,
		st.Error, st.UpdatedAt, st.Total, breakdown, verification)
	if err != nil {
		return fmt.Errorf("store deleter progress: %w", err)
	}
	return leaseHeld(n, id)
}

// FinishDeletionAttempt implements deletion.JobStore. The receipt of a
// COMPLETED job is stored in the same transaction: a job is never
// COMPLETED without the receipt it was issued.
func (s *Store) FinishDeletionAttempt(ctx context.Context, id uuid.UUID, owner string, u deletion.JobUpdate) error {
	err := s.conn.Tx(ctx, func(q Querier) error {
		var status string
		err := q.QueryRow(ctx, s.sql.Jobs.Finish, id, owner, string(u.Status), u.Verified, u.LastError, u.NextAttemptAt, u.Now).Scan(&status)
		if errors.Is(err, derrors.ErrNotFound) {
			return leaseHeld(0, id)
		}
		if err != nil {
			return err
		}
		if u.Receipt != nil && deletion.JobStatus(status) == deletion.JobCompleted {
			if _, err := q.Exec(ctx, s.sql.Receipts.Insert, id, u.Receipt.KeyID, u.Receipt.Body, u.Now); err != nil {
				return fmt.Errorf("store receipt: %w", err)
			}
		}
		if deletion.JobStatus(status) == deletion.JobCompleted && u.Verified {
			return s.recordErasure(ctx, q, id, u)
		}
		return nil
	})
	if err != nil && !errors.Is(err, derrors.ErrLeaseLost) {
		return fmt.Errorf("finish deletion attempt: %w", err)
	}
	return err
}

// CancelDeletionJob implements deletion.JobStore.
func (s *Store) CancelDeletionJob(ctx context.Context, tenant string, uid *int64, now time.Time) (*deletion.Job, deletion.CancelOutcome, error) {
	var (
		job     *deletion.Job
		outcome deletion.CancelOutcome
	)
	err := s.conn.Tx(ctx, func(q Querier) error {
		var id uuid.UUID
		err := q.QueryRow(ctx, s.sql.Jobs.CancelNow, tenant, uid, now).Scan(&id)
		switch {
		case err == nil:
			outcome = deletion.CancelledNow
			if _, err := q.Exec(ctx, s.sql.Jobs.CancelRunning, id, now); err != nil {
				return err
			}
		case errors.Is(err, derrors.ErrNotFound):
			err = q.QueryRow(ctx, s.sql.Jobs.CancelRequest, tenant, uid, now).Scan(&id)
			if err != nil && !errors.Is(err, derrors.ErrNotFound) {
				return err
			}
			outcome = deletion.CancelRequested
		default:
			return err
		}
		job, err = s.withDeleters(ctx, q, q.QueryRow(ctx, s.sql.Jobs.Latest, tenant))
		if errors.Is(err, derrors.ErrNotFound) {
			return fmt.Errorf("%w: tenant %s has no deletion job to cancel", derrors.ErrNotFound, tenant)
		}
		if err != nil {
			return err
		}
		if id == uuid.Nil {
			return fmt.Errorf("%w: the latest deletion job of tenant %s (%s) is %s since %s: there is nothing to cancel",
				derrors.ErrConflict, tenant, job.ID, job.Status, deletion.FormatTime(finishedOrUpdated(job)))
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, derrors.ErrNotFound) || errors.Is(err, derrors.ErrConflict) {
			return nil, 0, err // they say what happened
		}
		return nil, 0, fmt.Errorf("cancel deletion of tenant %q: %w", tenant, err)
	}
	return job, outcome, nil
}

// RetryDeletionJob implements deletion.JobStore.
func (s *Store) RetryDeletionJob(ctx context.Context, tenant string, now time.Time) (*deletion.Job, error) {
	var job *deletion.Job
	err := s.conn.Tx(ctx, func(q Querier) error {
		var id uuid.UUID
		err := q.QueryRow(ctx, s.sql.Jobs.RetryJob, tenant, now).Scan(&id)
		switch {
		case err == nil:
			if _, err := q.Exec(ctx, s.sql.Jobs.RetryDeleters, id, now); err != nil {
				return err
			}
		case !errors.Is(err, derrors.ErrNotFound):
			return err
		}
		job, err = s.withDeleters(ctx, q, q.QueryRow(ctx, s.sql.Jobs.Latest, tenant))
		if errors.Is(err, derrors.ErrNotFound) {
			return fmt.Errorf("%w: tenant %s has no deletion job to retry", derrors.ErrNotFound, tenant)
		}
		if err != nil {
			return err
		}
		if id == uuid.Nil {
			return fmt.Errorf("%w: the latest deletion job of tenant %s (%s) is %s: only a BLOCKED or PARTIAL job can be retried",
				derrors.ErrConflict, tenant, job.ID, job.Status)
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, derrors.ErrNotFound) || errors.Is(err, derrors.ErrConflict) {
			return nil, err
		}
		return nil, fmt.Errorf("retry deletion of tenant %q: %w", tenant, err)
	}
	return job, nil
}

func finishedOrUpdated(j *deletion.Job) time.Time {
	if j.FinishedAt != nil {
		return *j.FinishedAt
	}
	return j.UpdatedAt
}

// ReapCancelledJobs implements deletion.JobStore.
func (s *Store) ReapCancelledJobs(ctx context.Context, now time.Time) (int64, error) {
	n, err := s.conn.Exec(ctx, s.sql.Jobs.Reap, now)
	if err != nil {
		return 0, fmt.Errorf("end cancelled jobs of dead runners: %w", err)
	}
	return n, nil
}

// DeletionJobStats implements deletion.JobStore.
func (s *Store) DeletionJobStats(ctx context.Context, now time.Time) (deletion.JobStats, error) {
	st := deletion.JobStats{ByStatus: map[deletion.JobStatus]int64{}}
	err := s.conn.Snapshot(ctx, func(q Querier) error {
		type pair struct {
			status string
			n      int64
		}
		counts, err := QueryAll(ctx, q, func(r Scanner) (pair, error) {
			var p pair
			return p, r.Scan(&p.status, &p.n)
		}, s.sql.Jobs.StatusCounts)
		if err != nil {
			return err
		}
		for _, p := range counts {
			st.ByStatus[deletion.JobStatus(p.status)] = p.n
		}
		if err := q.QueryRow(ctx, s.sql.Jobs.Overdue, now).Scan(&st.OldestOverdue); err != nil {
			return err
		}
		if err := q.QueryRow(ctx, s.sql.Jobs.HeldJobs).Scan(&st.Held); err != nil {
			return err
		}
		return q.QueryRow(ctx, s.sql.Jobs.ActiveHolds).Scan(&st.Holds)
	})
	if err != nil {
		return st, fmt.Errorf("count deletion jobs: %w", err)
	}
	return st, nil
}
