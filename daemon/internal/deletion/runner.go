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
}

// Runner claims deletion jobs from the store and runs them. Several
// runners (daemons) may share one PostgreSQL store: a job is leased by one
// runner at a time, and a dead runner's job is taken over when its lease ends.
type Runner struct {
	store    JobStore
	reg      *Registry
	owner    string
	cfg      func() RunnerConfig
	log      hclog.Logger
	metrics  *metrics
	periodic *periodic.Metrics
	now      func() time.Time

	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// NewRunner returns a runner; owner names this daemon in leases.
// promReg and p may be nil (no metrics).
func NewRunner(store JobStore, reg *Registry, owner string, cfg func() RunnerConfig, log hclog.Logger, promReg prometheus.Registerer, p *periodic.Metrics) *Runner {
	return &Runner{
		store: store, reg: reg, owner: owner, cfg: cfg, log: log.Named("deletion"),
		metrics: newMetrics(promReg), periodic: p, now: time.Now, kick: make(chan struct{}, 1),
	}
}

// Kick asks the runner to look for work now (a job was just created).
func (r *Runner) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Start runs the loop in the background.
func (r *Runner) Start(context.Context) error {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.done = make(chan struct{})
	go r.loop(ctx)
	return nil
}

// Stop ends the loop; a job in progress is handed back (PARTIAL, due now)
// for the next start or another daemon. Safe to call twice.
func (r *Runner) Stop(ctx context.Context) error {
	if r.cancel == nil {
		return nil
	}
	r.once.Do(r.cancel)
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Runner) loop(ctx context.Context) {
	defer close(r.done)
	for {
		ran, err := r.runOnce(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.Error("deletion pass failed", "error", err)
		} else if err == nil {
			r.periodic.Success("deletion", r.cfg().PollInterval)
		}
		if ran {
			continue // there may be more due work
		}
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		case <-time.After(r.cfg().PollInterval):
		}
	}
}

// runOnce claims and runs one due job; ran is false when there was none.
func (r *Runner) runOnce(ctx context.Context) (ran bool, err error) {
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
	log.Info("deletion attempt started", "tenant_id", job.TenantID)
	start := r.now()
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	leaseLost := make(chan struct{})
	go r.heartbeat(ctx, job.ID, cfg, cancel, leaseLost)

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

	// Before deleting, count: the first count is the job's total for that
	// deleter; a later one tells how much an interrupted attempt removed.
	base := map[string]int64{}
	var ready []string
	counts := r.reg.CountSome(ctx, job.TenantID, todo)
	for _, f := range counts.Failed {
		d := states[f.Deleter]
		d.Status, d.Error, d.UpdatedAt = DeleterFailed, "count before delete: "+f.Error, r.now()
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
		if d.Total < 0 {
			d.Total = n + d.DeletedCount
		}
		// What is gone is the total minus what is left: exact even when the
		// last attempt died before it could report its final batch.
		d.DeletedCount = max(d.DeletedCount, d.Total-n)
		base[name] = d.DeletedCount
		d.Status, d.Error, d.UpdatedAt = DeleterRunning, "", r.now()
		d.Attempts++
		if err := r.store.SetDeleterState(ctx, job.ID, r.owner, *d); err != nil {
			log.Warn("store deleter state", "deleter", name, "error", err)
		}
		ready = append(ready, name)
	}

	var mu sync.Mutex
	report := r.reg.DeleteSome(ctx, job.TenantID, ready, func(name string, n int64) {
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
	// Record outcomes with a fresh context: the attempt's may be cancelled.
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	for name, res := range report.Succeeded {
		d := states[name]
		d.Status, d.Error, d.UpdatedAt = DeleterSucceeded, "", r.now()
		d.DeletedCount = base[name] + res.DeletedCount
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

	u := r.conclude(wctx, job, states, cfg, interrupted)
	if err := r.store.FinishDeletionAttempt(wctx, job.ID, r.owner, u); err != nil {
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

// conclude decides the job's status after an attempt.
func (r *Runner) conclude(ctx context.Context, job *Job, states map[string]*DeleterState, cfg RunnerConfig, interrupted bool) JobUpdate {
	now := r.now()
	var failed []string
	for _, d := range states {
		if d.Status != DeleterSucceeded {
			failed = append(failed, fmt.Sprintf("%s: %s", d.Name, d.Error))
		}
	}
	if interrupted {
		// Shutdown is not the job's fault: due again at once, no backoff.
		return JobUpdate{Status: JobPartial, LastError: "interrupted by daemon shutdown", NextAttemptAt: &now, Now: now}
	}
	if len(failed) > 0 {
		next := now.Add(cfg.RetryPolicy.Delay(job.Attempts - 1))
		return JobUpdate{Status: JobPartial, LastError: fmt.Sprintf("%d deleter(s) failed: %s", len(failed), strings.Join(sortedStrings(failed), "; ")),
			NextAttemptAt: &next, Now: now}
	}
	if !cfg.Verify {
		return JobUpdate{Status: JobCompleted, Verified: false, Now: now}
	}
	names := make([]string, 0, len(states))
	for n := range states {
		names = append(names, n)
	}
	counts := r.reg.CountSome(ctx, job.TenantID, names)
	var left []string
	for name, n := range counts.Counts {
		if n > 0 {
			left = append(left, fmt.Sprintf("%s has %d left", name, n))
			d := states[name]
			d.Status, d.Error, d.UpdatedAt = DeleterPending, fmt.Sprintf("verification found %d items left", n), now
			_ = r.store.SetDeleterState(ctx, job.ID, r.owner, *d)
		}
	}
	for _, f := range counts.Failed {
		left = append(left, fmt.Sprintf("%s could not verify: %s", f.Deleter, f.Error))
	}
	if len(left) > 0 {
		// Data appeared after the delete (a writer still running), or a
		// count failed: back to work, with backoff.
		next := now.Add(cfg.RetryPolicy.Delay(job.Attempts - 1))
		return JobUpdate{Status: JobPartial, LastError: "verification: " + strings.Join(sortedStrings(left), "; "), NextAttemptAt: &next, Now: now}
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
