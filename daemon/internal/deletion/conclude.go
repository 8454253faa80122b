package deletion

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// conclude decides the job's status after an attempt. A job is COMPLETED
// when every one of its deleters succeeded and, with verify on, a check
// with the canonical id afterwards found nothing left in any of them: the
// deleter's independent proof where it has one, else a count. A deleter
// that cannot check (its store is down, it is no longer configured) leaves
// the job PARTIAL, never verified. ctx is the attempt's:
// the verification stops with it. why is the stop cause when the attempt
// was stopped before its deletes ended.
func (r *Runner) conclude(ctx context.Context, job *Job, tenant string, states map[string]*DeleterState, cfg RunnerConfig, why error) JobUpdate {
	now := r.now()
	if why != nil {
		return stoppedUpdate(why, now)
	}
	names := sortedKeysOf(states)
	var failed, blocked []string
	for _, name := range names {
		switch d := states[name]; d.Status {
		case DeleterSucceeded:
		case DeleterBlocked:
			blocked = append(blocked, fmt.Sprintf("%s: %s", d.Name, d.Error))
		default:
			failed = append(failed, fmt.Sprintf("%s: %s", d.Name, d.Error))
		}
	}
	backoff := now.Add(cfg.RetryPolicy.Delay(job.Attempts - 1))
	if len(names) == 0 {
		// Nothing ran, so nothing can be said to be deleted.
		return JobUpdate{Status: JobPartial, LastError: "the job has no deleters and none is configured", NextAttemptAt: &backoff, Now: now}
	}
	if len(failed) > 0 {
		// The deleters worth retrying are retried; blocked ones wait for
		// an operator all the same (they are not run again).
		msg := fmt.Sprintf("%d deleter(s) failed: %s", len(failed), strings.Join(failed, "; "))
		if len(blocked) > 0 {
			msg += fmt.Sprintf("; %d blocked until an operator retries the job: %s", len(blocked), strings.Join(blocked, "; "))
		}
		return JobUpdate{Status: JobPartial, LastError: msg, NextAttemptAt: &backoff, Now: now}
	}
	if len(blocked) > 0 {
		// No retry can fix what is left: stop spending attempts on it.
		return JobUpdate{Status: JobBlocked, Now: now, LastError: fmt.Sprintf(
			"%d deleter(s) blocked, not retried until an operator fixes the cause and retries the job (lifecycled tenant retry): %s",
			len(blocked), strings.Join(blocked, "; "))}
	}
	if !cfg.Verify {
		return JobUpdate{Status: JobCompleted, Verified: false, Now: now}
	}
	deleteProof := map[string][]ProofCheck{}
	for _, name := range names {
		deleteProof[name] = states[name].Proof
	}
	outcomes := r.reg.VerifySome(ctx, tenant, names, deleteProof)
	// Verifying a large store takes a while: the outcome is as of now.
	now = r.now()
	backoff = now.Add(cfg.RetryPolicy.Delay(job.Attempts - 1))
	if why := stopCause(ctx); why != nil {
		u := stoppedUpdate(why, now)
		if errors.Is(why, errShutdown) {
			u.LastError = "interrupted by daemon shutdown during verification"
		}
		return u
	}
	wctx, wcancel := recordContext()
	defer wcancel()
	var left []string
	unverified := false
	for _, name := range names {
		o := outcomes[name]
		if o.err != nil {
			left = append(left, fmt.Sprintf("%s could not verify: %s", name, o.err))
			unverified = true
			continue
		}
		d := states[name]
		v := o.v
		d.Verification = &v
		if v.Method == MethodCount {
			d.settleBreakdown(v.Breakdown)
		}
		// A breakdown that disagrees with its count is not a zero.
		if found := max(v.Count, sum(v.Breakdown)); found > 0 {
			proof := ""
			if v.Method == MethodIndependent {
				proof = " by its independent proof (" + leftText(v) + ")"
			}
			left = append(left, fmt.Sprintf("%s has %d left%s", name, found, proof))
			d.Status, d.Error = DeleterPending, fmt.Sprintf("verification found %d items left%s", found, proof)
		}
		d.UpdatedAt = now
		if err := r.store.SetDeleterState(wctx, job.ID, r.owner, *d); err != nil {
			r.log.Error("store verification", "job_id", job.ID.String(), "deleter", name, "error", err)
		}
	}
	if len(left) > 0 || unverified {
		// Data appeared after the delete (a writer still running), or a
		// check failed: back to work, with backoff.
		return JobUpdate{Status: JobPartial, LastError: "verification: " + strings.Join(sortedStrings(left), "; "), NextAttemptAt: &backoff, Now: now}
	}
	return JobUpdate{Status: JobCompleted, Verified: true, Now: now}
}

// stoppedUpdate ends an attempt that was stopped. A shutdown is not the
// job's fault and a held job waits for its release (a held tenant's job is
// never claimed), so both are due again at once; a cancelled one is over.
func stoppedUpdate(why error, now time.Time) JobUpdate {
	switch {
	case errors.Is(why, errCancelled):
		return JobUpdate{Status: JobCancelled, Now: now,
			LastError: "cancelled by an operator; the report keeps what each deleter deleted before it stopped"}
	case errors.Is(why, errHeld):
		return JobUpdate{Status: JobPartial, NextAttemptAt: &now, Now: now,
			LastError: "stopped: the tenant was placed on legal hold; the job resumes when the hold is released"}
	default:
		return JobUpdate{Status: JobPartial, LastError: "interrupted by daemon shutdown", NextAttemptAt: &now, Now: now}
	}
}

func sortedKeysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedStrings(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
