package wire

import "github.com/lifecycled/lifecycled/daemon/internal/deletion"

// Counts is GET /api/v1/tenants/{tenant}/counts.
type Counts struct {
	// TenantID is the canonical id that was counted (a UUID in lower case).
	TenantID string           `json:"tenant_id"`
	Counts   map[string]int64 `json:"counts"`
	// Breakdown is each counted deleter's items per table, key pattern, ...
	Breakdown map[string]map[string]int64 `json:"breakdown"`
	// Total sums Counts; it leaves out the deleters in Failed.
	Total int64 `json:"total"`
	// Complete is false when a deleter could not count: Total is then a
	// lower bound, not what a deletion would remove.
	Complete bool               `json:"complete"`
	Failed   []deletion.Failure `json:"failed"`
}

// JobPage is a page of jobs: GET /api/v1/deletions and
// GET /api/v1/tenants/{tenant}/deletions.
type JobPage struct {
	Jobs []Job `json:"jobs"`
	// NextCursor fetches the next page (?cursor=); null on the last one.
	NextCursor *string `json:"next_cursor"`
}

// ApproveRequest is the body of POST /api/v1/tenants/{tenant}/deletion/approve.
type ApproveRequest struct {
	PlanHash *string `json:"plan_hash,omitempty"`
}

// Holds is GET /api/v1/holds.
type Holds struct {
	Holds      []Hold  `json:"holds"`
	NextCursor *string `json:"next_cursor"`
}

// HoldRequest is the body of PUT /api/v1/tenants/{tenant}/hold.
type HoldRequest struct {
	Reason *string `json:"reason,omitempty"`
}

// BulkResult is the answer of POST /api/v1/deletions.
type BulkResult struct {
	// Queued counts new jobs, Existing tenants whose active job was
	// returned, OnHold tenants refused for their legal hold.
	Queued   int        `json:"queued"`
	Existing int        `json:"existing"`
	OnHold   int        `json:"on_hold"`
	Results  []BulkItem `json:"results"`
}

// BulkItem is one tenant of a bulk request, in the request's order.
type BulkItem struct {
	Index     int                `json:"index"`
	TenantID  string             `json:"tenant_id"`
	JobID     string             `json:"job_id,omitempty"`
	Status    deletion.JobStatus `json:"status,omitempty"`
	Created   bool               `json:"created"`
	NotBefore *string            `json:"not_before,omitempty"`
	Error     *ErrorDetail       `json:"error,omitempty"`
}

// DeletionRequest is the body of POST /api/v1/tenants/{tenant}/deletion.
type DeletionRequest struct {
	NotBefore *string `json:"not_before,omitempty"`
	// PlanHash is the plan the caller read; when given, the plan now must have it.
	PlanHash *string `json:"plan_hash,omitempty"`
}

// BulkRequest is the body of POST /api/v1/deletions.
type BulkRequest struct {
	TenantIDs []string `json:"tenant_ids,omitempty"`
	NotBefore *string  `json:"not_before,omitempty"`
	PlanHash  *string  `json:"plan_hash,omitempty"`
}

// Job is the admin API form of a deletion job.
type Job struct {
	ID       string             `json:"id"`
	TenantID string             `json:"tenant_id"`
	Status   deletion.JobStatus `json:"status"`
	Attempts int                `json:"attempts"`
	// OnHold: the tenant is under a legal hold; the job waits for its release.
	OnHold        bool    `json:"on_hold"`
	CreatedAt     string  `json:"created_at"`
	UpdatedAt     string  `json:"updated_at"`
	NotBefore     *string `json:"not_before"`
	StartedAt     *string `json:"started_at"`
	FinishedAt    *string `json:"finished_at"`
	NextAttemptAt *string `json:"next_attempt_at"`
	// RequestedByUID and CancelledByUID are the callers' uids.
	RequestedByUID    *int64  `json:"requested_by_uid,omitempty"`
	CancelRequestedAt *string `json:"cancel_requested_at,omitempty"`
	CancelledByUID    *int64  `json:"cancelled_by_uid,omitempty"`
	LastError         string  `json:"last_error,omitempty"`
	// PlanHash is the plan the job is held to; null until a complete plan
	// was seen. ApprovalRequired: created under deletion.require_approval.
	// ApprovedAt and ApprovedByUID record the latest approval. PlanDrift
	// says why the runner sent the job back for approval.
	PlanHash         *string                 `json:"plan_hash"`
	ApprovalRequired bool                    `json:"approval_required"`
	ApprovedAt       *string                 `json:"approved_at,omitempty"`
	ApprovedByUID    *int64                  `json:"approved_by_uid,omitempty"`
	PlanDrift        string                  `json:"plan_drift,omitempty"`
	Report           deletion.DeletionReport `json:"report"`
	Verified         bool                    `json:"verified"`
	Deleters         []DeleterProgress       `json:"deleters"`
}

// DeleterProgress is one deleter's progress within a job.
type DeleterProgress struct {
	Name         string                 `json:"name"`
	Status       deletion.DeleterStatus `json:"status"`
	DeletedCount int64                  `json:"deleted_count"`
	Total        *int64                 `json:"total"`
	// Breakdown is DeletedCount per table, key pattern, ... ({} when the
	// plugin reports none).
	Breakdown map[string]int64 `json:"breakdown"`
	Attempts  int              `json:"attempts"`
	Error     string           `json:"error,omitempty"`
	UpdatedAt string           `json:"updated_at"`
}

// Hold is the admin API form of a legal hold.
type Hold struct {
	TenantID      string  `json:"tenant_id"`
	Reason        string  `json:"reason"`
	HeldAt        string  `json:"held_at"`
	HeldByUID     *int64  `json:"held_by_uid"`
	ReleasedAt    *string `json:"released_at,omitempty"`
	ReleasedByUID *int64  `json:"released_by_uid,omitempty"`
}
