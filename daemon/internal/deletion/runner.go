package deletion

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/leased"
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
	// MaxJobs is how many jobs run at once, on this daemon and across every
	// daemon of the state store (deletion.max_jobs); 0 means one on this
	// daemon and no limit across daemons.
	MaxJobs int
	// Notary issues the receipt of a COMPLETED and verified job; nil issues none.
	Notary Notary
}

// Why an attempt stopped before its end (the cause of its context).
var (
	errShutdown  = errors.New("interrupted by daemon shutdown")
	errCancelled = errors.New("stopped by a cancel")
	errHeld      = errors.New("stopped: the tenant was placed on legal hold")
	errLeaseLost = errors.New("lease lost to another daemon")
)

// Runner claims deletion jobs from the store and runs them, up to MaxJobs
// at once. Several runners (daemons) may share one PostgreSQL store: a job
// is leased by one runner at a time, and a dead runner's job is taken over
// when its lease ends.
type Runner struct {
	store   JobStore
	reg     *Registry
	owner   string
	cfg     func() RunnerConfig
	log     hclog.Logger
	metrics *metrics
	now     func() time.Time
	loop    *periodic.Loop
	// runs holds the attempts under way, each with its job's tenant.
	runs leased.Runs[string]
}

// NewRunner returns a runner; owner names this daemon in leases.
// promReg and p may be nil (no metrics).
func NewRunner(store JobStore, reg *Registry, owner string, cfg func() RunnerConfig, log hclog.Logger, promReg prometheus.Registerer, p *periodic.Metrics) *Runner {
	r := &Runner{
		store: store, reg: reg, owner: owner, cfg: cfg, log: log.Named("deletion"),
		metrics: newMetrics(promReg, store), now: time.Now,
	}
	r.loop = periodic.NewLoop(periodic.Config{
		Name: "deletion", Job: "deletion", Log: r.log, Metrics: p,
		Interval: func() time.Duration { return r.cfg().PollInterval },
		Pass:     r.pass,
	})
	return r
}

// Kick asks the runner to look for work now (a job was just created).
func (r *Runner) Kick() { r.loop.Kick() }

// Start runs the loop in the background.
func (r *Runner) Start(ctx context.Context) error {
	r.runs.Open(ctx)
	return r.loop.Start(ctx)
}

// Stop ends the loop and hands every job in progress back (PARTIAL, due
// now) for the next start or another daemon, waiting until each attempt
// recorded that or ctx ends. Safe to call twice.
func (r *Runner) Stop(ctx context.Context) error {
	err := r.loop.Stop(ctx)
	if cerr := r.runs.Close(ctx, errShutdown); cerr != nil {
		return cerr
	}
	return err
}

// pass ends cancelled jobs of dead runners, then claims due jobs while this
// runner has room for them; each runs in its own goroutine.
func (r *Runner) pass(ctx context.Context) (periodic.Outcome, error) {
	cfg := r.cfg()
	r.metrics.known(r.reg.Names())
	if n, err := r.store.ReapCancelledJobs(ctx, r.now()); err != nil {
		return periodic.Done, err
	} else if n > 0 {
		r.log.Info("cancelled jobs whose runner died are ended", "jobs", n)
	}
	claimed := 0
	for r.runs.Len() < max(cfg.MaxJobs, 1) && ctx.Err() == nil {
		now := r.now()
		job, err := r.claim(ctx, now, now.Add(cfg.Lease), cfg.MaxJobs)
		if err != nil || job == nil {
			if claimed > 0 {
				return periodic.More, err
			}
			return periodic.Done, err
		}
		// The config of record is the one read after the claim: a reload
		// (verification turned off, say) applies to every job claimed after
		// it, even in a pass that began before it.
		cfg = r.cfg()
		if !r.spawn(job, cfg) {
			break
		}
		claimed++
	}
	if claimed > 0 {
		return periodic.More, nil
	}
	return periodic.Done, nil
}

// claim takes the next due job, if any; a stop does not cut it short
// (leased.ClaimContext).
func (r *Runner) claim(ctx context.Context, now, leaseUntil time.Time, maxJobs int) (*Job, error) {
	ctx, cancel := leased.ClaimContext(ctx)
	defer cancel()
	return r.store.ClaimDeletionJob(ctx, r.owner, now, leaseUntil, maxJobs)
}

// spawn runs one attempt of job in the background, and looks for work
// when it ends (a slot is free); false when the runner is stopping (the
// claim's lease then runs out and the job is taken again).
func (r *Runner) spawn(job *Job, cfg RunnerConfig) bool {
	attempt := func(ctx context.Context, stop context.CancelCauseFunc) { r.run(ctx, stop, job, cfg) }
	switch r.runs.Start(job.ID, job.TenantID, attempt, r.loop.Kick) {
	case leased.Closed:
		return false
	case leased.AlreadyRunning:
		// The job's lease lapsed under an attempt of ours that still runs
		// (renewals failed for a lease): that attempt keeps it, and its
		// heartbeat renews the lease this claim took. A second attempt
		// would delete beside the first and report twice.
		r.log.Warn("claimed a job this daemon still runs; the running attempt keeps it", "job_id", job.ID.String())
	}
	return true
}

// interruptJob stops this runner's attempt of a job, if it runs one, with
// why as the cause: the deleters' contexts end, and each plugin stops
// within one batch.
func (r *Runner) interruptJob(id uuid.UUID, why error) { r.runs.Stop(id, why) }

// interruptTenant stops this runner's attempt of the tenant's job, if any.
func (r *Runner) interruptTenant(tenant string, why error) {
	r.runs.StopWhere(func(_ uuid.UUID, t string) bool { return t == tenant }, why)
}

// stopCause says why an attempt's context ended; nil while it runs.
func stopCause(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errCancelled), errors.Is(cause, errHeld), errors.Is(cause, errLeaseLost):
		return cause
	default:
		return errShutdown
	}
}

// heartbeat renews the lease until life ends (the attempt returned), and
// stops the attempt when the lease is lost, a cancel was requested or the
// tenant was held (by an operator on any daemon of the store). After a
// cancel or a hold it goes on renewing: the attempt still counts what the
// stopped deleters left and records it, which may take longer than a
// lease, and a lapsed lease would let a runner end the job as abandoned
// with the counts the plugins reported before they stopped. It checks as
// often as the runner polls for work, and at least three times a lease.
func (r *Runner) heartbeat(life context.Context, id uuid.UUID, cfg RunnerConfig, stop context.CancelCauseFunc) {
	every := cfg.Lease / 3
	if cfg.PollInterval > 0 && cfg.PollInterval < every {
		every = cfg.PollInterval
	}
	t := time.NewTicker(max(every, time.Millisecond))
	defer t.Stop()
	stopped := false
	for {
		select {
		case <-life.Done():
			return
		case <-t.C:
		}
		err := r.store.RenewDeletionLease(life, id, r.owner, r.now().Add(cfg.Lease))
		if errors.Is(err, derrors.ErrLeaseLost) {
			stop(errLeaseLost)
			return
		}
		if err != nil {
			if life.Err() == nil {
				r.log.Warn("renew deletion lease", "job_id", id.String(), "error", err)
			}
			continue
		}
		if stopped {
			continue
		}
		c, err := r.store.DeletionJobControl(life, id)
		switch {
		case err != nil:
			if life.Err() == nil {
				r.log.Warn("read deletion job control", "job_id", id.String(), "error", err)
			}
		case c.CancelRequested:
			stop(errCancelled)
			stopped = true
		case c.Held:
			stop(errHeld)
			stopped = true
		}
	}
}
