package ledger

import (
	"context"
	"math"
	"sort"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/periodic"
)

// ReverifyConfig is read at every pass, so a reload takes effect at the next.
type ReverifyConfig struct {
	// Interval is deletion.reverify_interval: a pass starts at most this
	// often across every daemon of the store; 0 turns the background
	// passes off (a pass asked for with Reverify still runs).
	Interval time.Duration
	// Rate is deletion.reverify_rate: ledger tenants counted per second.
	Rate float64
	// Reerase is deletion.reerase: a resurrection queues a job that erases
	// the tenant again.
	Reerase bool
	// RequireApproval is deletion.require_approval: a re-erase job waits
	// for approval too.
	RequireApproval bool
	// Lease bounds how long a dead daemon's pass keeps others from one.
	Lease          time.Duration
	TenantIDFormat string
}

// Counter counts a tenant with every configured deleter (the deletion
// Registry).
type Counter interface {
	Names() []string
	CountAll(ctx context.Context, tenant string) deletion.CountReport
}

// PassResult is what one pass did.
type PassResult struct {
	// Checked tenants were counted; Busy ones were skipped because a job
	// of theirs is unfinished; Failed ones could not be counted everywhere.
	Checked, Busy, Failed int
	// Resurrected tenants had data again; New of them were not already
	// reported; Reerased got a new job; Resolved were clean again after a
	// resurrection.
	Resurrected, New, Reerased, Resolved int
}

// pageSize is how many ledger tenants a pass reads at once.
const pageSize = 500

// Reverifier counts every ledger tenant in every configured deleter in the
// background, one pass per interval across every daemon of the state
// store (a lease in the store), at most Rate tenants a second.
type Reverifier struct {
	store   Store
	counter Counter
	owner   string
	cfg     func() ReverifyConfig
	log     hclog.Logger
	metrics *reverifyMetrics
	// kick tells the deletion runner that a job was queued; may be nil.
	kick  func()
	now   func() time.Time
	force atomic.Bool
	loop  *periodic.Loop
}

// NewReverifier returns a reverifier; owner names this daemon in the lease.
// promReg and p may be nil (no metrics).
func NewReverifier(store Store, counter Counter, owner string, cfg func() ReverifyConfig, kick func(), log hclog.Logger,
	promReg prometheus.Registerer, p *periodic.Metrics) *Reverifier {
	v := &Reverifier{store: store, counter: counter, owner: owner, cfg: cfg, log: log.Named("reverify"),
		metrics: newReverifyMetrics(promReg), kick: kick, now: time.Now}
	v.loop = periodic.NewLoop(periodic.Config{
		// No periodic success metric: most polls find no pass due, and a
		// pass over a large ledger outlasts many polls; the pass records
		// its own end (lifecycled_erasure_reverify_last_pass_timestamp_seconds).
		Name: "re-verification", Log: v.log, Metrics: p,
		Interval: func() time.Duration { return pollEvery(v.cfg().Interval) },
		Pass: func(ctx context.Context) (periodic.Outcome, error) {
			_, out, err := v.Pass(ctx)
			return out, err
		},
	})
	return v
}

// pollEvery is how often the loop asks whether a pass is due: the
// interval, between a tenth of a second and a minute (so that a reload
// that turns passes on, or another daemon's pass ending, is seen soon).
func pollEvery(interval time.Duration) time.Duration {
	switch {
	case interval <= 0 || interval > time.Minute:
		return time.Minute
	case interval < 100*time.Millisecond:
		return 100 * time.Millisecond
	default:
		return interval
	}
}

// Start runs the loop in the background.
func (v *Reverifier) Start(ctx context.Context) error { return v.loop.Start(ctx) }

// Stop ends the loop, waiting for a pass in progress to stop. Safe twice.
func (v *Reverifier) Stop(ctx context.Context) error { return v.loop.Stop(ctx) }

// Reverify asks for a pass now, due or not and even with passes turned
// off; it still waits for another daemon's pass in progress to end.
func (v *Reverifier) Reverify() {
	v.force.Store(true)
	v.loop.Kick()
}

// Burst is the token bucket's burst at rate r: a tenth of a second's
// worth, at least 1. Over any window of w seconds a pass counts at most
// r*w + Burst(r) tenants.
func Burst(r float64) int {
	return max(1, int(math.Ceil(r/10)))
}

// Pass runs one pass if it is due (or was asked for) and this daemon gets
// the lease: periodic.Done when it ran (or failed), periodic.Skipped when
// passes are off, not due, or another daemon holds the lease.
func (v *Reverifier) Pass(ctx context.Context) (PassResult, periodic.Outcome, error) {
	cfg := v.cfg()
	v.metrics.known(v.counter.Names())
	force := v.force.Swap(false)
	if cfg.Interval <= 0 && !force {
		return PassResult{}, periodic.Skipped, nil
	}
	lease := cfg.Lease
	if lease <= 0 {
		lease = time.Minute
	}
	now := v.now()
	got, err := v.store.AcquireReverifyLease(ctx, v.owner, now, now.Add(lease), now.Add(-cfg.Interval), force)
	if err != nil {
		return PassResult{}, periodic.Done, err
	}
	if !got {
		if force {
			v.log.Info("re-verification asked for, but another daemon runs a pass; it covers the same ledger")
		}
		return PassResult{}, periodic.Skipped, nil
	}
	start := v.now()
	res, err := v.run(ctx, cfg, lease)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if rerr := v.store.ReleaseReverifyLease(rctx, v.owner, v.now(), err == nil); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		return res, periodic.Done, err
	}
	v.metrics.lastPass.SetToCurrentTime()
	v.log.Info("re-verification pass finished", "checked", res.Checked, "busy", res.Busy, "failed", res.Failed,
		"resurrected", res.Resurrected, "new", res.New, "reerased", res.Reerased, "resolved", res.Resolved,
		"took", v.now().Sub(start).String())
	return res, periodic.Done, nil
}

func (v *Reverifier) run(ctx context.Context, cfg ReverifyConfig, lease time.Duration) (PassResult, error) {
	var res PassResult
	names := v.counter.Names()
	r := cfg.Rate
	if r <= 0 {
		r = 10
	}
	limiter := rate.NewLimiter(rate.Limit(r), Burst(r))
	renewed := v.now()
	after := ""
	for {
		page, err := v.store.LedgerTenants(ctx, after, pageSize)
		if err != nil {
			return res, err
		}
		for _, l := range page {
			after = l.TenantID
			if l.Busy {
				res.Busy++
				v.metrics.tenants.WithLabelValues("busy").Inc()
				continue
			}
			if err := limiter.Wait(ctx); err != nil {
				return res, err
			}
			if now := v.now(); now.Sub(renewed) > lease/3 {
				if err := v.store.RenewReverifyLease(ctx, v.owner, now.Add(lease)); err != nil {
					return res, err
				}
				renewed = now
			}
			if err := v.check(ctx, cfg, names, l, &res); err != nil {
				return res, err
			}
		}
		if len(page) < pageSize {
			return res, nil
		}
	}
}

// check counts one tenant and records what it found.
func (v *Reverifier) check(ctx context.Context, cfg ReverifyConfig, names []string, l Latest, res *PassResult) error {
	log := v.log.With("tenant_id", l.TenantID)
	tenant, err := deletion.CanonicalTenantID(l.TenantID, cfg.TenantIDFormat)
	if err != nil || tenant != l.TenantID {
		// Counting another spelling could miss the data: say so, skip it.
		res.Failed++
		v.metrics.tenants.WithLabelValues("failed").Inc()
		log.Warn("ledger tenant not re-verified: its id does not fit the current daemon.tenant_id_format", "error", err)
		return nil
	}
	rep := v.counter.CountAll(ctx, tenant)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	res.Checked++
	found := map[string]int64{}
	for name, n := range rep.Counts {
		// A breakdown that disagrees with its count is not a zero.
		if m := max(n, sumOf(rep.Breakdown[name])); m > 0 {
			found[name] = m
		}
	}
	for _, f := range rep.Failed {
		v.metrics.countFailures.WithLabelValues(f.Deleter).Inc()
		log.Warn("re-verification count failed", "deleter", f.Deleter, "error", f.Error)
	}
	now := v.now()
	if len(found) == 0 {
		if len(rep.Failed) > 0 {
			res.Failed++
			v.metrics.tenants.WithLabelValues("failed").Inc()
			return nil
		}
		v.metrics.tenants.WithLabelValues("clean").Inc()
		resolved, err := v.store.ResolveResurrection(ctx, tenant, now)
		if err != nil {
			return err
		}
		if resolved {
			res.Resolved++
			log.Info("resurrected tenant is clean again")
		}
		return nil
	}
	res.Resurrected++
	v.metrics.tenants.WithLabelValues("resurrected").Inc()
	rec, err := v.store.RecordResurrection(ctx, Found{Latest: l, Counts: found, At: now, Reerase: cfg.Reerase, Deleters: names,
		RequireApproval: cfg.RequireApproval})
	if err != nil {
		return err
	}
	if rec.New {
		res.New++
		for name := range found {
			v.metrics.resurrections.WithLabelValues(name).Inc()
		}
	}
	if rec.JobCreated {
		res.Reerased++
		if v.kick != nil {
			v.kick()
		}
	}
	args := []any{"erasure_job_id", l.JobID.String(), "receipt_sha256", l.ReceiptSHA256, "action", string(rec.Resurrection.Action),
		"new", rec.New, "deleters", sortedNames(found)}
	if rec.Resurrection.ReeraseJobID != nil {
		args = append(args, "reerase_job_id", rec.Resurrection.ReeraseJobID.String())
	}
	log.Warn("erased tenant's data found again (resurrection)", args...)
	return nil
}

func sumOf(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

func sortedNames(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

type reverifyMetrics struct {
	resurrections *prometheus.CounterVec
	tenants       *prometheus.CounterVec
	countFailures *prometheus.CounterVec
	lastPass      prometheus.Gauge
}

func newReverifyMetrics(reg prometheus.Registerer) *reverifyMetrics {
	m := &reverifyMetrics{
		resurrections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifecycled_erasure_resurrections_total",
			Help: "Erased tenants whose data re-verification found again (not already reported), by deleter that found it.",
		}, []string{"deleter"}),
		tenants: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifecycled_erasure_reverified_tenants_total",
			Help: "Ledger tenants a re-verification pass looked at, by result (clean, resurrected, busy, failed).",
		}, []string{"result"}),
		countFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifecycled_erasure_reverify_count_failures_total",
			Help: "Re-verification counts that failed, by deleter.",
		}, []string{"deleter"}),
		lastPass: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "lifecycled_erasure_reverify_last_pass_timestamp_seconds",
			Help: "When this daemon last finished a re-verification pass (Unix time); 0 before its first.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.resurrections, m.tenants, m.countFailures, m.lastPass)
	}
	return m
}

// known makes the series exist at 0 before their first increment, so that
// increase() and alert rules see the first one.
func (m *reverifyMetrics) known(deleters []string) {
	for _, d := range deleters {
		m.resurrections.WithLabelValues(d)
		m.countFailures.WithLabelValues(d)
	}
	for _, r := range []string{"clean", "resurrected", "busy", "failed"} {
		m.tenants.WithLabelValues(r)
	}
}
