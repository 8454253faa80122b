package adminapi

import (
	"maps"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

func fmtTime(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := deletion.FormatTime(*t)
	return &s
}

// HoldBody renders a hold.
func HoldBody(h *deletion.Hold) wire.Hold {
	return wire.Hold{TenantID: h.TenantID, Reason: h.Reason, HeldAt: deletion.FormatTime(h.HeldAt), HeldByUID: h.HeldByUID,
		ReleasedAt: fmtTime(h.ReleasedAt), ReleasedByUID: h.ReleasedByUID}
}

// JobBody renders a job with its report. A finished job has no next
// attempt, whatever the row still holds.
func JobBody(j *deletion.Job) wire.Job {
	out := wire.Job{
		ID: j.ID.String(), TenantID: j.TenantID, Status: j.Status, Attempts: j.Attempts, OnHold: j.OnHold,
		CreatedAt: deletion.FormatTime(j.CreatedAt), UpdatedAt: deletion.FormatTime(j.UpdatedAt),
		NotBefore: fmtTime(j.NotBefore), StartedAt: fmtTime(j.StartedAt), FinishedAt: fmtTime(j.FinishedAt),
		RequestedByUID: j.RequestedByUID, CancelRequestedAt: fmtTime(j.CancelRequestedAt), CancelledByUID: j.CancelledByUID,
		LastError: j.LastError, Verified: j.Verified,
		ApprovalRequired: j.ApprovalRequired, ApprovedAt: fmtTime(j.ApprovedAt), ApprovedByUID: j.ApprovedByUID, PlanDrift: j.PlanDrift,
		Report:   j.Report(),
		Deleters: []wire.DeleterProgress{},
	}
	if j.PlanHash != "" {
		h := j.PlanHash
		out.PlanHash = &h
	}
	if !j.Status.Finished() {
		out.NextAttemptAt = fmtTime(j.NextAttemptAt)
	}
	for _, d := range j.Deleters {
		dj := wire.DeleterProgress{Name: d.Name, Status: d.Status, DeletedCount: d.DeletedCount, Breakdown: breakdownOf(d.DeletedBreakdown),
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
