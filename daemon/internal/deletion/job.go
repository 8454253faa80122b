package deletion

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// JobStatus is where a deletion job is.
type JobStatus string

// Job statuses. PENDING: waiting for a runner. RUNNING: a runner holds its
// lease. PARTIAL: some deleters failed; they are retried with backoff.
// COMPLETED: every deleter succeeded (and, with verify on, a count found 0).
const (
	JobPending   JobStatus = "PENDING"
	JobRunning   JobStatus = "RUNNING"
	JobPartial   JobStatus = "PARTIAL"
	JobCompleted JobStatus = "COMPLETED"
)

// DeleterStatus is where one deleter of a job is.
type DeleterStatus string

// Deleter statuses.
const (
	DeleterPending   DeleterStatus = "PENDING"
	DeleterRunning   DeleterStatus = "RUNNING"
	DeleterSucceeded DeleterStatus = "SUCCEEDED"
	DeleterFailed    DeleterStatus = "FAILED"
)

// Job is a durable tenant deletion.
type Job struct {
	ID            uuid.UUID
	TenantID      string
	Status        JobStatus
	Attempts      int
	Verified      bool
	LastError     string
	CreatedAt     time.Time
	UpdatedAt     time.Time
	FinishedAt    *time.Time
	NextAttemptAt *time.Time
	Deleters      []DeleterState
}

// DeleterState is the stored progress of one deleter within a job.
type DeleterState struct {
	Name         string
	Status       DeleterStatus
	DeletedCount int64 // over all attempts
	// Total is what Count found before the first attempt; -1 when unknown.
	Total int64
	// TotalBreakdown and DeletedBreakdown are Total and DeletedCount per
	// table, key pattern, ... (the plugin's keys); nil when unknown.
	TotalBreakdown   map[string]int64
	DeletedBreakdown map[string]int64
	// Verification is the count after the job's deletes; nil until the
	// verification ran for the deleter's latest delete.
	Verification *Verification
	Attempts     int
	Error        string
	UpdatedAt    time.Time
}

// JobUpdate ends one attempt of a job.
type JobUpdate struct {
	Status        JobStatus
	Verified      bool
	LastError     string
	NextAttemptAt *time.Time
	Now           time.Time
}

// JobStore is what deletion jobs need from the state store.
type JobStore interface {
	// CreateDeletionJob creates a PENDING job for tenant with one PENDING row
	// per deleter, unless the tenant has an active (not COMPLETED) job, which
	// is returned instead with created=false.
	CreateDeletionJob(ctx context.Context, tenant string, deleters []string, now time.Time) (job *Job, created bool, err error)
	LatestDeletionJob(ctx context.Context, tenant string) (*Job, error)
	// ClaimDeletionJob leases one due job: PENDING or PARTIAL whose next
	// attempt has come, or RUNNING whose lease ended (its daemon died). It
	// returns nil when there is none.
	ClaimDeletionJob(ctx context.Context, owner string, now, leaseUntil time.Time) (*Job, error)
	// RenewDeletionLease extends the lease; derrors.ErrLeaseLost if another owner took it.
	RenewDeletionLease(ctx context.Context, id uuid.UUID, owner string, leaseUntil time.Time) error
	// SetDeleterState stores one deleter's progress; derrors.ErrLeaseLost as above.
	SetDeleterState(ctx context.Context, id uuid.UUID, owner string, st DeleterState) error
	// FinishDeletionAttempt ends an attempt and releases the lease.
	FinishDeletionAttempt(ctx context.Context, id uuid.UUID, owner string, u JobUpdate) error
}
