package deletion

import "time"

const timeFormat = "2006-01-02T15:04:05.000-07:00"

// FormatTime is the form of every time in the API and in receipts: RFC
// 3339 in UTC with milliseconds.
func FormatTime(t time.Time) string { return t.UTC().Format(timeFormat) }

// Report is the job's outcome as its deleters' states say it: succeeded
// deleters with their counts, failed and blocked ones with their errors,
// the ones a cancel stopped with what they deleted before (deleters still
// running or pending are in none of them), and what the verification
// counted.
func (j *Job) Report() DeletionReport {
	out := DeletionReport{Succeeded: map[string]Result{}, Failed: []Failure{}}
	for _, d := range j.Deleters {
		switch d.Status {
		case DeleterSucceeded:
			out.Succeeded[d.Name] = Result{DeletedCount: d.DeletedCount, Breakdown: copyBreakdown(d.DeletedBreakdown)}
		case DeleterFailed, DeleterBlocked:
			out.Failed = append(out.Failed, Failure{Deleter: d.Name, Error: d.Error})
		case DeleterCancelled:
			if out.Cancelled == nil {
				out.Cancelled = map[string]Result{}
			}
			out.Cancelled[d.Name] = Result{DeletedCount: d.DeletedCount, Breakdown: copyBreakdown(d.DeletedBreakdown)}
		}
		if d.Verification != nil {
			if out.Verification == nil {
				out.Verification = map[string]Verification{}
			}
			v := *d.Verification
			v.Breakdown = copyBreakdown(v.Breakdown)
			v.Checks = append([]ProofCheck(nil), v.Checks...)
			out.Verification[d.Name] = v
		}
	}
	return out
}
