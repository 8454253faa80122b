package deletion

import "time"

// JobJSON is the admin API form of a job.
type JobJSON struct {
	ID            string         `json:"id"`
	TenantID      string         `json:"tenant_id"`
	Status        JobStatus      `json:"status"`
	Attempts      int            `json:"attempts"`
	CreatedAt     string         `json:"created_at"`
	UpdatedAt     string         `json:"updated_at"`
	FinishedAt    *string        `json:"finished_at"`
	NextAttemptAt *string        `json:"next_attempt_at"`
	LastError     string         `json:"last_error,omitempty"`
	Report        DeletionReport `json:"report"`
	Verified      bool           `json:"verified"`
	Deleters      []DeleterJSON  `json:"deleters"`
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

const timeFormat = "2006-01-02T15:04:05.000-07:00"

func fmtTime(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := t.UTC().Format(timeFormat)
	return &s
}

// ToJSON renders the job with its report: succeeded deleters with their
// counts, failed ones with their errors (deleters still running or pending
// appear only under deleters), and what the verification counted.
func (j *Job) ToJSON() JobJSON {
	out := JobJSON{
		ID: j.ID.String(), TenantID: j.TenantID, Status: j.Status, Attempts: j.Attempts,
		CreatedAt: j.CreatedAt.UTC().Format(timeFormat), UpdatedAt: j.UpdatedAt.UTC().Format(timeFormat),
		FinishedAt: fmtTime(j.FinishedAt), LastError: j.LastError, Verified: j.Verified,
		Report:   DeletionReport{Succeeded: map[string]Result{}, Failed: []Failure{}},
		Deleters: []DeleterJSON{},
	}
	if j.Status != JobCompleted {
		out.NextAttemptAt = fmtTime(j.NextAttemptAt)
	}
	for _, d := range j.Deleters {
		dj := DeleterJSON{Name: d.Name, Status: d.Status, DeletedCount: d.DeletedCount, Breakdown: copyBreakdown(d.DeletedBreakdown),
			Attempts: d.Attempts, Error: d.Error, UpdatedAt: d.UpdatedAt.UTC().Format(timeFormat)}
		if d.Total >= 0 {
			total := d.Total
			dj.Total = &total
		}
		out.Deleters = append(out.Deleters, dj)
		switch d.Status {
		case DeleterSucceeded:
			out.Report.Succeeded[d.Name] = Result{DeletedCount: d.DeletedCount, Breakdown: copyBreakdown(d.DeletedBreakdown)}
		case DeleterFailed:
			out.Report.Failed = append(out.Report.Failed, Failure{Deleter: d.Name, Error: d.Error})
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
