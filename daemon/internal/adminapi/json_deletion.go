package adminapi

import (
	"maps"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
)

// JobJSON is the admin API form of a deletion job.
type JobJSON struct {
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
	Deleters         []DeleterJSON           `json:"deleters"`
}

// DeleterJSON is one deleter's progress within a job.
type DeleterJSON struct {
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

// HoldJSON is the admin API form of a legal hold.
type HoldJSON struct {
	TenantID      string  `json:"tenant_id"`
	Reason        string  `json:"reason"`
	HeldAt        string  `json:"held_at"`
	HeldByUID     *int64  `json:"held_by_uid"`
	ReleasedAt    *string `json:"released_at,omitempty"`
	ReleasedByUID *int64  `json:"released_by_uid,omitempty"`
}

func fmtTime(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := deletion.FormatTime(*t)
	return &s
}

// HoldBody renders a hold.
func HoldBody(h *deletion.Hold) HoldJSON {
	return HoldJSON{TenantID: h.TenantID, Reason: h.Reason, HeldAt: deletion.FormatTime(h.HeldAt), HeldByUID: h.HeldByUID,
		ReleasedAt: fmtTime(h.ReleasedAt), ReleasedByUID: h.ReleasedByUID}
}

// JobBody renders a job with its report. A finished job has no next
// attempt, whatever the row still holds.
func JobBody(j *deletion.Job) JobJSON {
	out := JobJSON{
		ID: j.ID.String(), TenantID: j.TenantID, Status: j.Status, Attempts: j.Attempts, OnHold: j.OnHold,
		CreatedAt: deletion.FormatTime(j.CreatedAt), UpdatedAt: deletion.FormatTime(j.UpdatedAt),
		NotBefore: fmtTime(j.NotBefore), StartedAt: fmtTime(j.StartedAt), FinishedAt: fmtTime(j.FinishedAt),
		RequestedByUID: j.RequestedByUID, CancelRequestedAt: fmtTime(j.CancelRequestedAt), CancelledByUID: j.CancelledByUID,
		LastError: j.LastError, Verified: j.Verified,
		ApprovalRequired: j.ApprovalRequired, ApprovedAt: fmtTime(j.ApprovedAt), ApprovedByUID: j.ApprovedByUID, PlanDrift: j.PlanDrift,
		Report:   j.Report(),
		Deleters: []DeleterJSON{},
	}
	if j.PlanHash != "" {
		h := j.PlanHash
		out.PlanHash = &h
	}
	if !j.Status.Finished() {
		out.NextAttemptAt = fmtTime(j.NextAttemptAt)
	}
	for _, d := range j.Deleters {
		dj := DeleterJSON{Name: d.Name, Status: d.Status, DeletedCount: d.DeletedCount, Breakdown: breakdownOf(d.DeletedBreakdown),
			Attempts: d.Attempts, Error: d.Error, UpdatedAt: deletion.FormatTime(d.UpdatedAt)}
		if d.Total >= 0 {
			total := d.Total
			dj.Total = &total
		}
		out.Deleters = append(out.Deleters, dj)
	}
	return out
}

// breakdownOf is a copy that is never nil: the API answers {} for none.
func breakdownOf(b map[string]int64) map[string]int64 {
	out := map[string]int64{}
	maps.Copy(out, b)
	return out
}
