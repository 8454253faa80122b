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

// jobSQL is the SQL of deletion.JobStore in one dialect
// (postgres_deletion.go, sqlite_deletion.go).
type jobSQL struct {
	create      string // a PENDING job unless the tenant has an active one: (id, tenant, now)
	addDeleter  string // (job id, deleter, now)
	active      string // the tenant's job that is not COMPLETED: (tenant)
	latest      string // (tenant)
	claim       string // one due job: (now, owner, lease until)
	renew       string // (id, owner, lease until)
	setDeleter  string // (id, owner, name, status, deleted, attempts, error, updated_at, total, breakdown, verification)
	finish      string // (id, owner, status, verified, last error, next attempt, finished_at, now)
	deletersFor string // (job id)
}

// jobColumns is what every statement that returns a job selects, for
// scanJob; deleterColumns likewise for a job's deleters.
const (
	jobColumns = `id, tenant_id, status, attempts, verified, COALESCE(last_error, ''), created_at, updated_at,
	finished_at, next_attempt_at`
	deleterColumns = `deleter, status, deleted_count, COALESCE(initial_count, -1), attempts, COALESCE(error, ''),
	updated_at, breakdown, verification`
)

func scanJob(row scanner) (*deletion.Job, error) {
	var (
		j      deletion.Job
		status string
	)
	if err := row.Scan(&j.ID, &j.TenantID, &status, &j.Attempts, &j.Verified, &j.LastError, &j.CreatedAt,
		&j.UpdatedAt, &j.FinishedAt, &j.NextAttemptAt); err != nil {
		return nil, err
	}
	j.Status = deletion.JobStatus(status)
	return &j, nil
}

func scanDeleter(row scanner) (deletion.DeleterState, error) {
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
func (s *sqlStore) withDeleters(ctx context.Context, q querier, row scanner) (*deletion.Job, error) {
	j, err := scanJob(row)
	if err != nil {
		return nil, err
	}
	if j.Deleters, err = queryAll(ctx, q, scanDeleter, s.sql.jobs.deletersFor, j.ID); err != nil {
		return nil, fmt.Errorf("read deleters of job %s: %w", j.ID, err)
	}
	return j, nil
}

// CreateDeletionJob implements deletion.JobStore.
func (s *sqlStore) CreateDeletionJob(ctx context.Context, tenant string, deleters []string, now time.Time) (*deletion.Job, bool, error) {
	var (
		job     *deletion.Job
		created bool
	)
	err := s.db.tx(ctx, func(q querier) error {
		id := newID()
		n, err := q.exec(ctx, s.sql.jobs.create, id, tenant, now)
		if err != nil {
			return fmt.Errorf("create deletion job: %w", err)
		}
		if created = n == 1; created {
			for _, d := range deleters {
				if _, err := q.exec(ctx, s.sql.jobs.addDeleter, id, d, now); err != nil {
					return fmt.Errorf("create deletion job: %w", err)
				}
			}
		}
		job, err = s.withDeleters(ctx, q, q.queryRow(ctx, s.sql.jobs.active, tenant))
		return err
	})
	return job, created, err
}

// LatestDeletionJob implements deletion.JobStore.
func (s *sqlStore) LatestDeletionJob(ctx context.Context, tenant string) (*deletion.Job, error) {
	j, err := s.withDeleters(ctx, s.db, s.db.queryRow(ctx, s.sql.jobs.latest, tenant))
	if err != nil {
		return nil, fmt.Errorf("deletion job for tenant %q: %w", tenant, err)
	}
	return j, nil
}

// ClaimDeletionJob implements deletion.JobStore.
func (s *sqlStore) ClaimDeletionJob(ctx context.Context, owner string, now, leaseUntil time.Time) (*deletion.Job, error) {
	j, err := s.withDeleters(ctx, s.db, s.db.queryRow(ctx, s.sql.jobs.claim, now, owner, leaseUntil))
	if errors.Is(err, derrors.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim deletion job: %w", err)
	}
	return j, nil
}

// RenewDeletionLease implements deletion.JobStore.
func (s *sqlStore) RenewDeletionLease(ctx context.Context, id uuid.UUID, owner string, leaseUntil time.Time) error {
	n, err := s.db.exec(ctx, s.sql.jobs.renew, id, owner, leaseUntil)
	if err != nil {
		return fmt.Errorf("renew deletion lease: %w", err)
	}
	return leaseHeld(n, id)
}

// SetDeleterState implements deletion.JobStore.
func (s *sqlStore) SetDeleterState(ctx context.Context, id uuid.UUID, owner string, st deletion.DeleterState) error {
	breakdown, verification, err := encodeDeleterDetail(st)
	if err != nil {
		return err
	}
	n, err := s.db.exec(ctx, s.sql.jobs.setDeleter, id, owner, st.Name, string(st.Status), st.DeletedCount, st.Attempts,
		st.Error, st.UpdatedAt, st.Total, breakdown, verification)
	if err != nil {
		return fmt.Errorf("store deleter progress: %w", err)
	}
	return leaseHeld(n, id)
}

// FinishDeletionAttempt implements deletion.JobStore.
func (s *sqlStore) FinishDeletionAttempt(ctx context.Context, id uuid.UUID, owner string, u deletion.JobUpdate) error {
	var finished *time.Time
	if u.Status == deletion.JobCompleted {
		finished = &u.Now
	}
	n, err := s.db.exec(ctx, s.sql.jobs.finish, id, owner, string(u.Status), u.Verified, u.LastError, u.NextAttemptAt,
		finished, u.Now)
	if err != nil {
		return fmt.Errorf("finish deletion attempt: %w", err)
	}
	return leaseHeld(n, id)
}
