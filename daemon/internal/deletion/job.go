package deletion

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/lifecycled/lifecycled/daemon/internal/enum"
)

// JobStatus is where a deletion job is.
type JobStatus string

// Job statuses. SCHEDULED: waiting for its not_before (a grace period).
// PENDING: waiting for a runner. RUNNING: a runner holds its lease.
// PARTIAL: some deleters failed; they are retried with backoff. BLOCKED:
// what is left failed for good (a permanent error, a deleter no longer
// configured): nothing retries it until an operator retries the job
// (Service.Retry) after fixing the cause. COMPLETED:
// every deleter succeeded (and, with verify on, a count found 0).
// CANCELLED: an operator stopped it; what was deleted so far stays in its
// report. COMPLETED and CANCELLED are final: such a job never runs again.
// AWAITING_APPROVAL: the job waits for an approver ([deletion]
// require_approval), or its plan changed since it was approved and it
// waits for the new one to be approved; no runner takes it until then.
const (
	JobAwaitingApproval JobStatus = "AWAITING_APPROVAL"
	JobScheduled        JobStatus = "SCHEDULED"
	JobPending          JobStatus = "PENDING"
	JobRunning          JobStatus = "RUNNING"
	JobPartial          JobStatus = "PARTIAL"
	JobBlocked          JobStatus = "BLOCKED"
	JobCompleted        JobStatus = "COMPLETED"
	JobCancelled        JobStatus = "CANCELLED"
)

// JobStatusesDescribed declares every job status, in the order a job moves
// through them, with what it means: the API's messages, the CLI, the
// console and docs/values.md come from it.
var JobStatusesDescribed = []enum.Value[JobStatus]{
	{Value: JobAwaitingApproval, Meaning: "waits for an approval of its plan ([deletion] require_approval), or of its changed plan"},
	{Value: JobScheduled, Meaning: "waits for its `not_before` (a grace period)"},
	{Value: JobPending, Meaning: "waits for a runner"},
	{Value: JobRunning, Meaning: "a runner holds its lease"},
	{Value: JobPartial, Meaning: "a deleter failed or the verification found data: the failed deleters are retried with backoff"},
	{Value: JobBlocked, Meaning: "what is left failed for good (a permanent error, a deleter no longer configured): not retried until an operator retries the job"},
	{Value: JobCompleted, Meaning: "every deleter succeeded and the verification found nothing: final"},
	{Value: JobCancelled, Meaning: "an operator stopped it; what was deleted stays in its report: final"},
}

// JobStatuses lists every job status, in the order a job moves through them.
var JobStatuses = enum.Values(JobStatusesDescribed)

// Unfinished lists the statuses of a job that is not over, in JobStatuses'
// order.
func Unfinished() []JobStatus {
	var out []JobStatus
	for _, s := range JobStatuses {
		if !s.Finished() {
			out = append(out, s)
		}
	}
	return out
}

// Finished reports whether a job in status s is over for good.
func (s JobStatus) Finished() bool { return s == JobCompleted || s == JobCancelled }

// ParseJobStatus accepts a status in any letter case.
func ParseJobStatus(s string) (JobStatus, bool) {
	for _, st := range JobStatuses {
		if strings.EqualFold(string(st), s) {
			return st, true
		}
	}
	return "", false
}

// DeleterStatus is where one deleter of a job is.
type DeleterStatus string

// Deleter statuses. FAILED: it failed in a way worth retrying (its store
// was down); the job retries it with backoff. BLOCKED: it failed in a way a
// retry cannot fix (a permanent error such as an invalid config, or it is
// no longer configured): it is not run again until an operator retries the
// job. CANCELLED: the deleter was stopped by a cancel; its counts are what
// it deleted before it stopped.
const (
	DeleterPending   DeleterStatus = "PENDING"
	DeleterRunning   DeleterStatus = "RUNNING"
	DeleterSucceeded DeleterStatus = "SUCCEEDED"
	DeleterFailed    DeleterStatus = "FAILED"
	DeleterBlocked   DeleterStatus = "BLOCKED"
	DeleterCancelled DeleterStatus = "CANCELLED"
)

// DeleterStatusesDescribed declares every status of one deleter of a job
// with what it means (docs/values.md).
var DeleterStatusesDescribed = []enum.Value[DeleterStatus]{
	{Value: DeleterPending, Meaning: "not run yet in this attempt"},
	{Value: DeleterRunning, Meaning: "running"},
	{Value: DeleterSucceeded, Meaning: "deleted the tenant's items from its store"},
	{Value: DeleterFailed, Meaning: "failed in a way worth retrying (its store was down): retried with backoff"},
	{Value: DeleterBlocked, Meaning: "failed for good (a permanent error, no longer configured): waits for an operator's retry"},
	{Value: DeleterCancelled, Meaning: "stopped by a cancel; its counts are what it deleted before"},
}

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
	// NotBefore is when a scheduled job may start; nil when it was due at once.
	NotBefore *time.Time
	// StartedAt is when a runner first claimed the job.
	StartedAt *time.Time
	// RequestedByUID and CancelledByUID are the callers' uids (peer
	// credentials of the admin socket); nil when unknown.
	RequestedByUID    *int64
	CancelRequestedAt *time.Time
	CancelledByUID    *int64
	// OnHold: the tenant is under a legal hold, so the job waits.
	OnHold bool
	// PlanHash names the plan the job is held to (the one current when it
	// was created, or the one approved); "" until a complete plan was seen.
	PlanHash string
	// ApprovalRequired: the job was created under require_approval.
	// ApprovedAt and ApprovedByUID record the latest approval.
	ApprovalRequired bool
	ApprovedAt       *time.Time
	ApprovedByUID    *int64
	// PlanDrift says why the runner sent the job back for approval (its
	// plan changed, or a deleter refused to plan); "" otherwise.
	PlanDrift string
	Deleters  []DeleterState
	// Reerases is set on a re-erase job when its receipt is issued: the
	// erasure it repeats (see ReerasureSource).
	Reerases *ReerasureRef
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
	// Verification is the check after the job's deletes; nil until the
	// verification ran for the deleter's latest delete.
	Verification *Verification
	// Proof is what the deleter's last successful Delete checked of its
	// own (sdk.Verifier: the identities it recorded); nil otherwise.
	Proof     []ProofCheck
	Attempts  int
	Error     string
	UpdatedAt time.Time
}

// JobUpdate ends one attempt of a job.
type JobUpdate struct {
	Status        JobStatus
	Verified      bool
	LastError     string
	NextAttemptAt *time.Time
	Now           time.Time
	// Receipt, when set, is stored with a COMPLETED job in the same write.
	Receipt *SignedReceipt
}

// SignedReceipt is an issued erasure receipt, byte for byte.
type SignedReceipt struct {
	KeyID string
	Body  []byte
}

// JobRequest asks for one job.
type JobRequest struct {
	Tenant string // canonical
	// NotBefore: the job is SCHEDULED until then; nil or past means at once.
	NotBefore *time.Time
	UID       *int64
	// PlanHash is the plan the job is held to; "" when none was complete.
	PlanHash string
	// RequireApproval keeps the job AWAITING_APPROVAL until approved.
	RequireApproval bool
}

// JobCreated is the outcome of one JobRequest: the new job (Created), the
// tenant's active job, or the hold that refused it (Job is nil then).
type JobCreated struct {
	Job     *Job
	Created bool
	Hold    *Hold
}

// JobControl is what an operator asked of a running job since it was claimed.
type JobControl struct {
	CancelRequested bool
	Held            bool
}

// CancelOutcome says what a cancel did.
type CancelOutcome int

// Cancel outcomes.
const (
	// CancelledNow: the job was not running; it is CANCELLED.
	CancelledNow CancelOutcome = iota
	// CancelRequested: a runner holds the job; it stops at the next batch.
	CancelRequested
)

// JobStore is what deletion jobs need from the state store.
type JobStore interface {
	// CreateDeletionJobs creates, for each request in one transaction, a
	// job with one PENDING row per deleter (SCHEDULED when NotBefore is
	// after now), unless the tenant has an active (not finished) job, which
	// is returned instead with Created false, or is under a hold, which is
	// returned instead of a job.
	CreateDeletionJobs(ctx context.Context, reqs []JobRequest, deleters []string, now time.Time) ([]JobCreated, error)
	LatestDeletionJob(ctx context.Context, tenant string) (*Job, error)
	// ListDeletionJobs returns jobs newest first (created_at, then id), with
	// their deleters, as the filter asks.
	ListDeletionJobs(ctx context.Context, f JobFilter) ([]*Job, error)
	// ClaimDeletionJob leases one due job: SCHEDULED, PENDING or PARTIAL
	// whose time has come, or RUNNING whose lease ended (its daemon died);
	// never one whose cancel was requested nor one of a held tenant; and,
	// when maxJobs > 0, only while fewer than maxJobs jobs hold a live
	// lease, counted across every daemon of the store. It returns nil when
	// there is none.
	ClaimDeletionJob(ctx context.Context, owner string, now, leaseUntil time.Time, maxJobs int) (*Job, error)
	// RenewDeletionLease extends the lease; derrors.ErrLeaseLost if another owner took it.
	RenewDeletionLease(ctx context.Context, id uuid.UUID, owner string, leaseUntil time.Time) error
	// DeletionJobControl reads whether a cancel was requested for the job
	// and whether its tenant is held.
	DeletionJobControl(ctx context.Context, id uuid.UUID) (JobControl, error)
	// SetDeleterState stores one deleter's progress; derrors.ErrLeaseLost as above.
	SetDeleterState(ctx context.Context, id uuid.UUID, owner string, st DeleterState) error
	// FinishDeletionAttempt ends an attempt and releases the lease. A job
	// whose cancel was requested ends CANCELLED unless the attempt completed it.
	FinishDeletionAttempt(ctx context.Context, id uuid.UUID, owner string, u JobUpdate) error
	// CancelDeletionJob cancels the tenant's active job: at once unless a
	// live lease holds it (then the request is recorded for its runner).
	// derrors.ErrNotFound when the tenant has no job; derrors.ErrConflict
	// when its latest job is finished.
	CancelDeletionJob(ctx context.Context, tenant string, uid *int64, now time.Time) (*Job, CancelOutcome, error)
	// RetryDeletionJob makes the tenant's BLOCKED or PARTIAL job due now,
	// with its BLOCKED deleters PENDING again. derrors.ErrNotFound when the
	// tenant has no job; derrors.ErrConflict when its latest job is in any
	// other status (running, waiting to start, or finished).
	RetryDeletionJob(ctx context.Context, tenant string, now time.Time) (*Job, error)
	// ReapCancelledJobs ends, as CANCELLED, jobs whose cancel was requested
	// while their runner died (RUNNING with an expired lease).
	ReapCancelledJobs(ctx context.Context, now time.Time) (int64, error)
	// DeletionReceipt returns the receipt stored with a job; derrors.ErrNotFound if none.
	DeletionReceipt(ctx context.Context, jobID uuid.UUID) (*SignedReceipt, error)
	// DeletionJobStats counts jobs for the metrics.
	DeletionJobStats(ctx context.Context, now time.Time) (JobStats, error)
	HoldStore
	ReceiptKeyStore
	ApprovalStore
}

// JobStats is what the deletion gauges show.
type JobStats struct {
	ByStatus map[JobStatus]int64
	// OldestOverdue is the earliest not_before of a SCHEDULED job that is
	// past it and not held; nil when none.
	OldestOverdue *time.Time
	// Held counts unfinished jobs of held tenants; Holds counts active holds.
	Held, Holds int64
}
