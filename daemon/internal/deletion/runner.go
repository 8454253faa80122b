package deletion

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
	"github.com/lifecycled/lifecycled/daemon/internal/retry"
)

// RunnerConfig is read at every pass, so a reload takes effect at once.
type RunnerConfig struct {
	PollInterval time.Duration
	Lease        time.Duration
	RetryPolicy  retry.Policy // backoff between attempts of a PARTIAL job
	Verify       bool
	// TenantIDFormat is daemon.tenant_id_format ("" means "uuid"): a job's
	// tenant id is put in its canonical spelling before any plugin call.
	TenantIDFormat string
}

// Runner claims deletion jobs from the store and runs them. Several
// runners (daemons) may share one PostgreSQL store: a job is leased by one
// runner at a time, and a dead runner's job is taken over when its lease ends.
type Runner struct {
	store   JobStore
	reg     *Registry
	owner   string
	cfg     func() RunnerConfig
	log     hclog.Logger
	metrics *metrics
	now     func() time.Time
	loop    *periodic.Loop
}

// NewRunner returns a runner; owner names this daemon in leases.
// promReg and p may be nil (no metrics).
func NewRunner(store JobStore, reg *Registry, owner string, cfg func() RunnerConfig, log hclog.Logger, promReg prometheus.Registerer, p *periodic.Metrics) *Runner {
	r := &Runner{
		store: store, reg: reg, owner: owner, cfg: cfg, log: log.Named("deletion"),
		metrics: newMetrics(promReg), now: time.Now,
	}
	r.loop = periodic.NewLoop(periodic.Config{
		Name: "deletion", Job: "deletion", Log: r.log, Metrics: p,
		Interval: func() time.Duration { return r.cfg().PollInterval },
		Pass: func(ctx context.Context) (periodic.Outcome, error) {
			ran, err := r.runOnce(ctx)
			if ran {
				return periodic.More, err // there may be more due work
			}
			return periodic.Done, err
		},
	})
	return r
}

// Kick asks the runner to look for work now (a job was just created).
func (r *Runner) Kick() { r.loop.Kick() }

// Start runs the loop in the background.
func (r *Runner) Start(ctx context.Context) error { return r.loop.Start(ctx) }

// Stop ends the loop; a job in progress is handed back (PARTIAL, due now)
// for the next start or another daemon. Safe to call twice.
func (r *Runner) Stop(ctx context.Context) error { return r.loop.Stop(ctx) }

// runOnce claims and runs one due job; ran is false when there was none.
func (r *Runner) runOnce(ctx context.Context) (ran bool, err error) {
	r.metrics.known(r.reg.Names())
	cfg := r.cfg()
	now := r.now()
	job, err := r.store.ClaimDeletionJob(ctx, r.owner, now, now.Add(cfg.Lease))
	if err != nil || job == nil {
		return false, err
	}
	r.run(ctx, job, cfg)
	return true, nil
}

// run performs one attempt of a job.
func (r *Runner) run(parent context.Context, job *Job, cfg RunnerConfig) {
	log := r.log.With("job_id", job.ID.String(), "attempt", job.Attempts)
	start := r.now()
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	leaseLost := make(chan struct{})
	go r.heartbeat(ctx, job.ID, cfg, cancel, leaseLost)

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

	configured := map[string]bool{}
	for _, n := range r.reg.Names() {
		configured[n] = true
	}
	states := map[string]*DeleterState{}
	var todo []string
	for i := range job.Deleters {
		d := &job.Deleters[i]
		states[d.Name] = d
		if d.Status == DeleterSucceeded {
			continue
		}
		if !configured[d.Name] {
			d.Status, d.Error, d.UpdatedAt = DeleterFailed, fmt.Sprintf("deleter %s is no longer configured", d.Name), r.now()
			_ = r.store.SetDeleterState(ctx, job.ID, r.owner, *d)
			continue
		}
		todo = append(todo, d.Name)
	}
	// A deleter added to the config while the job was active holds the
	// tenant's data too: the job is not done (nor verified) until it ran.
	for _, n := range r.reg.Names() {
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

	// Before deleting, count: the first count is the job's total for that
	// deleter; a later one tells how much an interrupted attempt removed.
	base := map[string]int64{}
	baseBreakdown := map[string]map[string]int64{}
	var ready []string
	counts := r.reg.CountSome(ctx, tenant, todo)
	for _, f := range counts.Failed {
		d := states[f.Deleter]
		d.Status, d.Error, d.UpdatedAt, d.Verification = DeleterFailed, "count before delete: "+f.Error, r.now(), nil
		d.Attempts++
		r.metrics.failures.WithLabelValues(d.Name).Inc()
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
	report := r.reg.DeleteSome(ctx, tenant, ready, func(name string, n int64) {
		mu.Lock()
		d := states[name]
		d.DeletedCount, d.UpdatedAt = base[name]+n, r.now()
		snapshot := *d
		mu.Unlock()
		if err := r.store.SetDeleterState(ctx, job.ID, r.owner, snapshot); err != nil && ctx.Err() == nil {
			log.Warn("store deletion progress", "deleter", name, "error", err)
		}
	})

	interrupted := parent.Err() != nil
	select {
	case <-leaseLost:
		log.Warn("lease lost to another daemon; abandoning this attempt")
		return
	default:
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
		d.Status, d.UpdatedAt = DeleterFailed, r.now()
		d.Error = f.Error
		if interrupted {
			d.Error = "interrupted by daemon shutdown"
		}
		d.DeletedCount = max(d.DeletedCount, base[f.Deleter]+f.Deleted)
		r.metrics.deleted.WithLabelValues(f.Deleter).Add(float64(f.Deleted))
		if !interrupted {
			r.metrics.failures.WithLabelValues(f.Deleter).Inc()
		}
		if err := r.store.SetDeleterState(wctx, job.ID, r.owner, *d); err != nil {
			log.Error("store deleter result", "deleter", f.Deleter, "error", err)
		}
	}

	u := r.conclude(ctx, job, tenant, states, cfg, interrupted)
	select {
	case <-leaseLost:
		log.Warn("lease lost to another daemon; abandoning this attempt")
		return
	default:
	}
	fctx, fcancel := recordContext()
	defer fcancel()
	r.finish(fctx, log, job, start, u)
}

// recordContext bounds the writes that record an attempt's outcome.
func recordContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// finish records the end of an attempt and releases the lease.
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
	log.Info("deletion attempt finished", "status", u.Status, "verified", u.Verified, "last_error", u.LastError, "took", r.now().Sub(start).String())
}

// conclude decides the job's status after an attempt. A job is COMPLETED
// when every one of its deleters succeeded and, with verify on, a count
// with the canonical id afterwards found nothing left in any of them: a
// deleter that cannot count (its store is down, it is no longer
// configured) leaves the job PARTIAL, never verified. ctx is the attempt's:
// the verification stops with it.
func (r *Runner) conclude(ctx context.Context, job *Job, tenant string, states map[string]*DeleterState, cfg RunnerConfig, interrupted bool) JobUpdate {
	now := r.now()
	names := make([]string, 0, len(states))
	var failed []string
	for name, d := range states {
		names = append(names, name)
		if d.Status != DeleterSucceeded {
			failed = append(failed, fmt.Sprintf("%s: %s", d.Name, d.Error))
		}
	}
	sort.Strings(names)
	if interrupted {
		// Shutdown is not the job's fault: due again at once, no backoff.
		return JobUpdate{Status: JobPartial, LastError: "interrupted by daemon shutdown", NextAttemptAt: &now, Now: now}
	}
	backoff := now.Add(cfg.RetryPolicy.Delay(job.Attempts - 1))
	if len(names) == 0 {
		// Nothing ran, so nothing can be said to be deleted.
		return JobUpdate{Status: JobPartial, LastError: "the job has no deleters and none is configured", NextAttemptAt: &backoff, Now: now}
	}
	if len(failed) > 0 {
		return JobUpdate{Status: JobPartial, LastError: fmt.Sprintf("%d deleter(s) failed: %s", len(failed), strings.Join(sortedStrings(failed), "; ")),
			NextAttemptAt: &backoff, Now: now}
	}
	if !cfg.Verify {
		return JobUpdate{Status: JobCompleted, Verified: false, Now: now}
	}
	counts := r.reg.CountSome(ctx, tenant, names)
	// Counting a large store takes a while: the outcome is as of now.
	now = r.now()
	backoff = now.Add(cfg.RetryPolicy.Delay(job.Attempts - 1))
	if ctx.Err() != nil {
		return JobUpdate{Status: JobPartial, LastError: "interrupted by daemon shutdown during verification", NextAttemptAt: &now, Now: now}
	}
	wctx, wcancel := recordContext()
	defer wcancel()
	var left []string
	for _, name := range names {
		n, ok := counts.Counts[name]
		if !ok {
			continue // in counts.Failed
		}
		d := states[name]
		b := counts.Breakdown[name]
		d.Verification = &Verification{Count: n, Breakdown: b}
		d.settleBreakdown(b)
		// A breakdown that disagrees with its count is not a zero.
		if found := max(n, sum(b)); found > 0 {
			left = append(left, fmt.Sprintf("%s has %d left", name, found))
			d.Status, d.Error = DeleterPending, fmt.Sprintf("verification found %d items left", found)
		}
		d.UpdatedAt = now
		if err := r.store.SetDeleterState(wctx, job.ID, r.owner, *d); err != nil {
			r.log.Error("store verification", "job_id", job.ID.String(), "deleter", name, "error", err)
		}
	}
	for _, f := range counts.Failed {
		left = append(left, fmt.Sprintf("%s could not verify: %s", f.Deleter, f.Error))
	}
	if len(left) > 0 || len(counts.Counts) != len(names) {
		// Data appeared after the delete (a writer still running), or a
		// count failed: back to work, with backoff.
		return JobUpdate{Status: JobPartial, LastError: "verification: " + strings.Join(sortedStrings(left), "; "), NextAttemptAt: &backoff, Now: now}
	}
	return JobUpdate{Status: JobCompleted, Verified: true, Now: now}
}

// heartbeat renews the lease until ctx ends; losing it cancels the attempt.
func (r *Runner) heartbeat(ctx context.Context, id uuid.UUID, cfg RunnerConfig, cancel context.CancelFunc, lost chan<- struct{}) {
	t := time.NewTicker(cfg.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			err := r.store.RenewDeletionLease(ctx, id, r.owner, r.now().Add(cfg.Lease))
			if errors.Is(err, derrors.ErrLeaseLost) {
				close(lost)
				cancel()
				return
			}
			if err != nil && ctx.Err() == nil {
				r.log.Warn("renew deletion lease", "job_id", id.String(), "error", err)
			}
		}
	}
}

func sortedStrings(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
