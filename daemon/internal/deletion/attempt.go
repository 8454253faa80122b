package deletion

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/leased"
	"github.com/lifecycled/lifecycled/sdk"
)

// run performs one attempt of a job. ctx ends with the attempt's stop
// cause: a shutdown, a cancel, a hold or a lost lease.
func (r *Runner) run(ctx context.Context, stop context.CancelCauseFunc, job *Job, cfg RunnerConfig) {
	log := r.log.With("job_id", job.ID.String(), "attempt", job.Attempts)
	start := r.now()
	// The lease outlives ctx: a stopped attempt still records its end.
	endHeartbeat := leased.Heartbeat(ctx, func(life context.Context) { r.heartbeat(life, job.ID, cfg, stop) })
	defer endHeartbeat()

	// Jobs are stored under the canonical id, but the format may have
	// changed since (a reload): every plugin call and the verification use
	// the spelling the current format defines, or nothing runs.
	tenant, err := CanonicalTenantID(job.TenantID, cfg.TenantIDFormat)
	if err != nil {
		log.Error("deletion attempt refused", "tenant_id", job.TenantID, "error", err)
		next := r.now().Add(cfg.RetryPolicy.Delay(job.Attempts - 1))
		wctx, wcancel := recordContext()
		defer wcancel()
		r.finish(wctx, log, job, start, JobUpdate{Status: JobPartial, NextAttemptAt: &next, Now: r.now(),
			LastError: fmt.Sprintf("no deleter was called: the job's tenant id does not fit the current daemon.tenant_id_format: %v", err)})
		return
	}
	log.Info("deletion attempt started", "tenant_id", tenant)

	// One reading of the configured deleters for the whole attempt: one
	// added by a reload after the plan was checked must not join it
	// unplanned (the next attempt's plan sees it).
	configured := r.reg.Names()
	unplanned, checked, ok := r.planGate(ctx, log, job, tenant, cfg, configured)
	if !ok {
		return
	}
	states, todo := r.prepare(ctx, log, job, configured)
	todo = r.skipUnplanned(ctx, job, states, todo, unplanned)

	// Before deleting, count: the first count is the job's total for that
	// deleter; a later one tells how much an interrupted attempt removed.
	base := map[string]int64{}
	baseBreakdown := map[string]map[string]int64{}
	var ready []string
	counts := r.reg.CountSome(ctx, tenant, todo)
	for _, f := range counts.Failed {
		d := states[f.Deleter]
		d.Status, d.Error, d.UpdatedAt, d.Verification = failedStatus(f.Err), "count before delete: "+f.Error, r.now(), nil
		d.Attempts++
		if ctx.Err() == nil {
			r.metrics.failures.WithLabelValues(d.Name).Inc()
		}
		_ = r.store.SetDeleterState(ctx, job.ID, r.owner, *d)
	}
	for _, name := range todo {
		n, ok := counts.Counts[name]
		if !ok {
			continue
		}
		d := states[name]
		d.settle(n, counts.Breakdown[name])
		base[name], baseBreakdown[name] = d.DeletedCount, copyBreakdown(d.DeletedBreakdown)
		d.Status, d.Error, d.UpdatedAt, d.Verification = DeleterRunning, "", r.now(), nil
		d.Attempts++
		if err := r.store.SetDeleterState(ctx, job.ID, r.owner, *d); err != nil {
			log.Warn("store deleter state", "deleter", name, "error", err)
		}
		ready = append(ready, name)
	}

	var mu sync.Mutex
	report := r.reg.DeleteSome(ctx, tenant, ready, checked, func(name string, n int64) {
		mu.Lock()
		d := states[name]
		d.DeletedCount, d.UpdatedAt = base[name]+n, r.now()
		snapshot := *d
		mu.Unlock()
		if err := r.store.SetDeleterState(ctx, job.ID, r.owner, snapshot); err != nil && ctx.Err() == nil {
			log.Warn("store deletion progress", "deleter", name, "error", err)
		}
	})

	why := stopCause(ctx)
	if errors.Is(why, errLeaseLost) {
		r.abandon(log, job)
		return
	}
	// Record outcomes with a context of their own: the attempt's may be
	// cancelled by now, and a long delete must not eat the time to record it.
	wctx, wcancel := recordContext()
	defer wcancel()
	for name, res := range report.Succeeded {
		d := states[name]
		d.Status, d.Error, d.UpdatedAt = DeleterSucceeded, "", r.now()
		d.succeeded(base[name], baseBreakdown[name], res)
		r.metrics.deleted.WithLabelValues(name).Add(float64(res.DeletedCount))
		if err := r.store.SetDeleterState(wctx, job.ID, r.owner, *d); err != nil {
			log.Error("store deleter result", "deleter", name, "error", err)
		}
	}
	for _, f := range report.Failed {
		d := states[f.Deleter]
		d.Status, d.UpdatedAt = failedStatus(f.Err), r.now()
		d.Error = f.Error
		d.DeletedCount = max(d.DeletedCount, base[f.Deleter]+f.Deleted)
		r.metrics.deleted.WithLabelValues(f.Deleter).Add(float64(f.Deleted))
		if why == nil {
			r.metrics.failures.WithLabelValues(f.Deleter).Inc()
			if err := r.store.SetDeleterState(wctx, job.ID, r.owner, *d); err != nil {
				log.Error("store deleter result", "deleter", f.Deleter, "error", err)
			}
		}
	}
	if why != nil {
		r.settleStopped(wctx, log, job, tenant, states, todo, why)
	}

	u := r.conclude(ctx, job, tenant, states, cfg, why)
	if errors.Is(stopCause(ctx), errLeaseLost) {
		r.abandon(log, job)
		return
	}
	if u.Status == JobCompleted && u.Verified && cfg.Notary != nil {
		done := r.withStates(job, states)
		if err := r.reerasureOf(wctx, done); err != nil {
			log.Error("read which erasure this job repeats; the receipt will not name it", "error", err)
		}
		rec, err := cfg.Notary.Issue(done, u.Now)
		if err != nil {
			// The erasure is done and verified either way: record it, and
			// say loudly that the proof is missing.
			log.Error("issue erasure receipt", "error", err)
		} else {
			u.Receipt = rec
		}
	}
	fctx, fcancel := recordContext()
	defer fcancel()
	r.finish(fctx, log, job, start, u)
}

// prepare returns the states of the job's deleters by name and the names
// of those this attempt runs: every one not yet SUCCEEDED that is still
// configured, and every deleter configured since the job was created (it
// holds the tenant's data too: the job is not done, nor verified, until it
// ran). A deleter no longer configured is BLOCKED, and a BLOCKED one is
// not run: a retry cannot help it, an operator's retry of the job can.
func (r *Runner) prepare(ctx context.Context, log hclog.Logger, job *Job, names []string) (map[string]*DeleterState, []string) {
	configured := map[string]bool{}
	for _, n := range names {
		configured[n] = true
	}
	states := map[string]*DeleterState{}
	var todo []string
	for i := range job.Deleters {
		d := &job.Deleters[i]
		states[d.Name] = d
		if d.Status == DeleterSucceeded || d.Status == DeleterBlocked {
			continue
		}
		if !configured[d.Name] {
			d.Status, d.Error, d.UpdatedAt = DeleterBlocked, fmt.Sprintf("deleter %s is no longer configured", d.Name), r.now()
			if err := r.store.SetDeleterState(ctx, job.ID, r.owner, *d); err != nil {
				log.Warn("store deleter state", "deleter", d.Name, "error", err)
			}
			continue
		}
		todo = append(todo, d.Name)
	}
	for _, n := range names {
		if _, ok := states[n]; ok {
			continue
		}
		d := &DeleterState{Name: n, Status: DeleterPending, Total: -1, UpdatedAt: r.now()}
		states[n] = d
		if err := r.store.SetDeleterState(ctx, job.ID, r.owner, *d); err != nil {
			log.Warn("add deleter to job", "deleter", n, "error", err)
			continue
		}
		log.Info("deleter configured since the job started joins it", "deleter", n)
		todo = append(todo, n)
	}
	return states, todo
}

// settledCounts counts until three counts a moment apart agree (or ctx
// ends): the statement a plugin was running when it was stopped can still
// commit on the store after the plugin returned, and a count taken before
// that would make the report understate what was erased.
func settledCounts(ctx context.Context, count func() CountReport) CountReport {
	prev, same := count(), 0
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			return prev
		case <-time.After(settlePause):
		}
		cur := count()
		if !sameCounts(prev, cur) {
			prev, same = cur, 0
			continue
		}
		if same++; same == 2 {
			return cur
		}
	}
	return prev
}

// settlePause is how long settledCounts waits between two counts.
const settlePause = 300 * time.Millisecond

func sameCounts(a, b CountReport) bool {
	if len(a.Counts) != len(b.Counts) || len(a.Failed) != len(b.Failed) {
		return false
	}
	for name, n := range a.Counts {
		if m, ok := b.Counts[name]; !ok || m != n {
			return false
		}
	}
	return true
}

// failedStatus is the status a deleter's failure leaves it in: BLOCKED when
// the plugin classed the error permanent (retrying the same call cannot
// succeed), FAILED, to be retried with backoff, otherwise.
func failedStatus(err error) DeleterStatus {
	if sdk.ClassOf(err) == sdk.ClassPermanent {
		return DeleterBlocked
	}
	return DeleterFailed
}

// settleStopped records the deleters a cancel or a hold stopped, with
// exact counts: once they stopped, a count of what is left, taken from
// the total the first count found, is what they deleted, including a batch
// whose end the plugin could not report before it stopped.
func (r *Runner) settleStopped(ctx context.Context, log hclog.Logger, job *Job, tenant string, states map[string]*DeleterState, todo []string, why error) {
	var stopped []string
	for _, name := range todo {
		if states[name].Status != DeleterSucceeded {
			stopped = append(stopped, name)
		}
	}
	if len(stopped) == 0 {
		return
	}
	// A shutdown has no time to count: the next attempt's first count
	// settles the numbers then.
	counts := CountReport{Counts: map[string]int64{}}
	if !errors.Is(why, errShutdown) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
		counts = settledCounts(cctx, func() CountReport { return r.reg.CountSome(cctx, tenant, stopped) })
		cancel()
	}
	status, msg := DeleterFailed, why.Error()
	switch {
	case errors.Is(why, errCancelled):
		status, msg = DeleterCancelled, "stopped by a cancel; deleted_count is what it deleted before it stopped"
	case errors.Is(why, errHeld):
		msg += "; the job resumes when the hold is released"
	}
	for _, name := range stopped {
		d := states[name]
		if n, ok := counts.Counts[name]; ok {
			d.settle(n, counts.Breakdown[name])
		} else if !errors.Is(why, errShutdown) {
			log.Warn("count after the deleter stopped", "deleter", name, "error", failureOf(counts, name))
		}
		d.Status, d.Error, d.UpdatedAt, d.Verification = status, msg, r.now(), nil
		if err := r.store.SetDeleterState(ctx, job.ID, r.owner, *d); err != nil {
			log.Error("store deleter result", "deleter", name, "error", err)
		}
	}
}

// settleTimeout bounds the count that settles stopped deleters.
const settleTimeout = 2 * time.Minute

func failureOf(c CountReport, name string) string {
	for _, f := range c.Failed {
		if f.Deleter == name {
			return f.Error
		}
	}
	return "no count"
}

// withStates is job with its deleters as this attempt leaves them.
func (r *Runner) withStates(job *Job, states map[string]*DeleterState) *Job {
	out := *job
	out.Deleters = make([]DeleterState, 0, len(states))
	for _, n := range sortedKeysOf(states) {
		out.Deleters = append(out.Deleters, *states[n])
	}
	return &out
}

// recordContext bounds the writes that record an attempt's outcome.
func recordContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// finish records the end of an attempt and releases the lease.
// abandon ends an attempt that lost its lease. The job is another
// daemon's, unless this daemon's runner claimed it back meanwhile (the
// other one handed it back, or stalled past its own lease): the runner
// starts no second attempt beside one still running, so this one hands
// the job back, due now, instead of leaving it RUNNING with no attempt
// until the lease the claim took runs out.
func (r *Runner) abandon(log hclog.Logger, job *Job) {
	ctx, cancel := recordContext()
	defer cancel()
	now := r.now()
	err := r.store.FinishDeletionAttempt(ctx, job.ID, r.owner, JobUpdate{Status: JobPartial, NextAttemptAt: &now, Now: now,
		LastError: "an attempt lost its lease to another daemon; the job resumes with the next claim"})
	switch {
	case err == nil:
		log.Warn("lease lost during the attempt and taken back since; the job is handed back, due now")
	case errors.Is(err, derrors.ErrLeaseLost):
		log.Warn("lease lost to another daemon; abandoning this attempt")
	default:
		log.Error("hand back a deletion job whose attempt lost its lease", "error", err)
	}
}

func (r *Runner) finish(ctx context.Context, log hclog.Logger, job *Job, start time.Time, u JobUpdate) {
	if err := r.store.FinishDeletionAttempt(ctx, job.ID, r.owner, u); err != nil {
		if errors.Is(err, derrors.ErrLeaseLost) {
			log.Warn("lease lost before the attempt was recorded")
			return
		}
		log.Error("record deletion attempt", "error", err)
		return
	}
	r.metrics.jobs.WithLabelValues(string(u.Status)).Inc()
	if u.Receipt != nil {
		r.metrics.receipts.Inc()
	}
	log.Info("deletion attempt finished", "status", u.Status, "verified", u.Verified, "receipt", u.Receipt != nil,
		"last_error", u.LastError, "took", r.now().Sub(start).String())
}
