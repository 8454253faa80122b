package deletion

import "time"

// JobJSON is the admin API form of a job.
type JobJSON struct {
	ID       string    `json:"id"`
	TenantID string    `json:"tenant_id"`
	Status   JobStatus `json:"status"`
	Attempts int       `json:"attempts"`
	// OnHold: the tenant is under a legal hold; the job waits for its release.
	OnHold        bool    `json:"on_hold"`
	CreatedAt     string  `json:"created_at"`
	UpdatedAt     string  `json:"updated_at"`
	NotBefore     *string `json:"not_before"`
	StartedAt     *string `json:"started_at"`
	FinishedAt    *string `json:"finished_at"`
	NextAttemptAt *string `json:"next_attempt_at"`
	// RequestedByUID and CancelledByUID are the callers' uids.
	RequestedByUID    *int64         `json:"requested_by_uid,omitempty"`
	CancelRequestedAt *string        `json:"cancel_requested_at,omitempty"`
	CancelledByUID    *int64         `json:"cancelled_by_uid,omitempty"`
	LastError         string         `json:"last_error,omitempty"`
	Report            DeletionReport `json:"report"`
	Verified          bool           `json:"verified"`
	Deleters          []DeleterJSON  `json:"deleters"`
}

// DeleterJSON is one deleter's progress within a job.
type DeleterJSON struct {
	Name         string        `json:"name"`
	Status       DeleterStatus `json:"status"`
	DeletedCount int64         `json:"deleted_count"`
	Total        *int64        `json:"total"`
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

const timeFormat = "2006-01-02T15:04:05.000-07:00"

// FormatTime is the form of every time in the API and in receipts: RFC
// 3339 in UTC with milliseconds.
func FormatTime(t time.Time) string { return t.UTC().Format(timeFormat) }

func fmtTime(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := FormatTime(*t)
	return &s
}

// ToJSON renders the hold.
func (h *Hold) ToJSON() HoldJSON {
	return HoldJSON{TenantID: h.TenantID, Reason: h.Reason, HeldAt: FormatTime(h.HeldAt), HeldByUID: h.HeldByUID,
		ReleasedAt: fmtTime(h.ReleasedAt), ReleasedByUID: h.ReleasedByUID}
}

// ToJSON renders the job with its report: succeeded deleters with their
// counts, failed ones with their errors, the ones a cancel stopped with
// what they deleted before (deleters still running or pending appear only
// under deleters), and what the verification counted.
func (j *Job) ToJSON() JobJSON {
	out := JobJSON{
		ID: j.ID.String(), TenantID: j.TenantID, Status: j.Status, Attempts: j.Attempts, OnHold: j.OnHold,
		CreatedAt: FormatTime(j.CreatedAt), UpdatedAt: FormatTime(j.UpdatedAt),
		NotBefore: fmtTime(j.NotBefore), StartedAt: fmtTime(j.StartedAt), FinishedAt: fmtTime(j.FinishedAt),
		RequestedByUID: j.RequestedByUID, CancelRequestedAt: fmtTime(j.CancelRequestedAt), CancelledByUID: j.CancelledByUID,
		LastError: j.LastError, Verified: j.Verified,
		Report:   DeletionReport{Succeeded: map[string]Result{}, Failed: []Failure{}},
		Deleters: []DeleterJSON{},
	}
	if !j.Status.Finished() {
		out.NextAttemptAt = fmtTime(j.NextAttemptAt)
	}
	for _, d := range j.Deleters {
		dj := DeleterJSON{Name: d.Name, Status: d.Status, DeletedCount: d.DeletedCount, Breakdown: copyBreakdown(d.DeletedBreakdown),
			Attempts: d.Attempts, Error: d.Error, UpdatedAt: FormatTime(d.UpdatedAt)}
		if d.Total >= 0 {
			total := d.Total
			dj.Total = &total
		}
		out.Deleters = append(out.Deleters, dj)
		switch d.Status {
		case DeleterSucceeded:
			out.Report.Succeeded[d.Name] = Result{DeletedCount: d.DeletedCount, Breakdown: copyBreakdown(d.DeletedBreakdown)}
		case DeleterFailed, DeleterBlocked:
			out.Report.Failed = append(out.Report.Failed, Failure{Deleter: d.Name, Error: d.Error})
		case DeleterCancelled:
			if out.Report.Cancelled == nil {
				out.Report.Cancelled = map[string]Result{}
			}
			out.Report.Cancelled[d.Name] = Result{DeletedCount: d.DeletedCount, Breakdown: copyBreakdown(d.DeletedBreakdown)}
		}
		if d.Verification != nil {
			if out.Report.Verification == nil {
				out.Report.Verification = map[string]Verification{}
			}
			out.Report.Verification[d.Name] = Verification{Count: d.Verification.Count, Breakdown: copyBreakdown(d.Verification.Breakdown)}
		}
	}
	return out
}
