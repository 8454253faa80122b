package deletion

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
)

// planGate runs before anything of an attempt is deleted. It computes the
// tenant's plan again and compares it with the plan the job is held to:
// when a deleter's part differs (a new table, a changed foreign key path,
// a changed pattern, a deleter added or removed; counts do not matter), or
// a deleter refuses to plan because its store no longer matches its config
// (storeChanged), the job goes back to AWAITING_APPROVAL naming what
// changed, and nothing is deleted. A deleter that fails to plan otherwise
// (its store is down, it refuses this tenant id) fails this attempt on its
// own, as a failed count would: it is returned in unplanned, and the
// deleters whose plans match run. ok is false when the attempt ended here.
//
// checked holds, per deleter that planned, the fingerprint of its part of
// the plan that passed. Delete gets it (sdk.DeleteRequest.PlanFingerprint)
// so that the plugin refuses when its store changed between this check and
// the delete, which no check here can see.
func (r *Runner) planGate(ctx context.Context, log hclog.Logger, job *Job, tenant string, cfg RunnerConfig, names []string) (unplanned map[string]DeleterPlan, checked map[string]string, ok bool) {
	cur := r.reg.PlanSome(ctx, tenant, names)
	var drift []string
	unplanned = map[string]DeleterPlan{}
	for _, d := range cur.Failed() {
		// A refusal is a change only against a plan the job is held to;
		// without one it is the deleter's failure, as a failed count is.
		if !d.storeChanged() || job.PlanHash == "" || ctx.Err() != nil {
			unplanned[d.Name] = d
			continue
		}
		drift = append(drift, fmt.Sprintf("%s refused to plan: %s", d.Name, d.Error))
	}
	if job.PlanHash == "" {
		// Adopted only when it covers every deleter of the job: a plan
		// without one (no longer configured) is not the job's plan.
		if len(drift) == 0 && cur.Complete() && coversJob(cur, job) {
			if err := r.adoptPlan(ctx, job, cur); err != nil {
				return nil, nil, r.planUnreadable(log, job, fmt.Errorf("record the job's plan: %w", err), cfg)
			}
			log.Info("deletion job held to the plan seen at its first start", "plan_hash", cur.Hash)
		}
	} else {
		body, err := r.store.PlanBody(ctx, job.PlanHash)
		if err != nil && !errors.Is(err, derrors.ErrNotFound) {
			return nil, nil, r.planUnreadable(log, job, fmt.Errorf("read the job's plan %s: %w", job.PlanHash, err), cfg)
		}
		var approved PlanShape
		if err == nil {
			approved, err = ParsePlanShape(job.PlanHash, body)
		}
		if err != nil {
			drift = append(drift, fmt.Sprintf("the plan the job is held to (%s) cannot be read from the state store: %v", job.PlanHash, err))
		} else {
			drift = append(drift, driftAgainst(approved, cur, unplanned)...)
		}
	}
	if len(drift) == 0 {
		checked = map[string]string{}
		for _, d := range cur.Deleters {
			if d.Outcome == PlanPlanned {
				checked[d.Name] = d.Fingerprint
			}
		}
		return unplanned, checked, true
	}
	msg := fmt.Sprintf("plan changed since the job's plan %s was set; nothing was deleted in this attempt: %s. "+
		"Read the plan again (lifecycled tenant plan %s) and approve it (lifecycled tenant approve %s --plan-hash H), or cancel the job",
		orNone(job.PlanHash), strings.Join(drift, "; "), job.TenantID, job.TenantID)
	log.Warn("deletion job refused: its plan changed; it awaits approval", "tenant_id", job.TenantID,
		"plan_hash", job.PlanHash, "current_plan_hash", cur.Hash, "drift", msg)
	wctx, cancel := recordContext()
	defer cancel()
	if err := r.store.AwaitApproval(wctx, job.ID, r.owner, msg, r.now()); err != nil {
		if errors.Is(err, derrors.ErrLeaseLost) {
			log.Warn("lease lost before the plan change was recorded")
		} else {
			log.Error("record plan change", "error", err)
		}
		return nil, nil, false
	}
	r.metrics.jobs.WithLabelValues(string(JobAwaitingApproval)).Inc()
	return nil, nil, false
}

// driftAgainst compares the current plan with the approved shape, leaving
// out the deleters that could not plan for now (they do not run).
func driftAgainst(approved PlanShape, cur *Plan, unplanned map[string]DeleterPlan) []string {
	now := PlanShape{}
	for _, d := range cur.Deleters {
		if d.Outcome != PlanFailed {
			now.Deleters = append(now.Deleters, d.shape())
		}
	}
	was := PlanShape{}
	for _, d := range approved.Deleters {
		if _, skip := unplanned[d.Name]; !skip {
			was.Deleters = append(was.Deleters, d)
		}
	}
	drift := DescribeDrift(was, now)
	if len(drift) == 0 && cur.Complete() && cur.Hash != approved.Hash() {
		// Cannot happen with one shape per hash; said plainly if it does.
		drift = append(drift, fmt.Sprintf("the plan hash is now %s", cur.Hash))
	}
	return drift
}

func (r *Runner) adoptPlan(ctx context.Context, job *Job, p *Plan) error {
	shape, _ := p.Shape()
	if err := r.store.SavePlan(ctx, p.Hash, shape.Canonical(), r.now()); err != nil {
		return err
	}
	if err := r.store.AdoptPlan(ctx, job.ID, r.owner, p.Hash); err != nil {
		return err
	}
	job.PlanHash = p.Hash
	return nil
}

// planUnreadable ends an attempt whose plan could not be checked because
// the state store failed: nothing is deleted, and the job is retried. It
// returns false: the attempt ended.
func (r *Runner) planUnreadable(log hclog.Logger, job *Job, err error, cfg RunnerConfig) bool {
	log.Error("deletion attempt refused: the plan could not be checked", "error", err)
	next := r.now().Add(cfg.RetryPolicy.Delay(job.Attempts - 1))
	wctx, cancel := recordContext()
	defer cancel()
	r.finish(wctx, log, job, r.now(), JobUpdate{Status: JobPartial, NextAttemptAt: &next, Now: r.now(),
		LastError: "no deleter was called: the plan could not be checked: " + err.Error()})
	return false
}

// skipUnplanned fails, for this attempt, the deleters that could not plan
// for a reason of their own (a store that is down, a tenant id refused).
func (r *Runner) skipUnplanned(ctx context.Context, job *Job, states map[string]*DeleterState, todo []string, unplanned map[string]DeleterPlan) []string {
	if len(unplanned) == 0 {
		return todo
	}
	out := todo[:0:0]
	for _, name := range todo {
		p, skip := unplanned[name]
		if !skip {
			out = append(out, name)
			continue
		}
		d := states[name]
		// Classified as a failed count is: a permanent error (a tenant id
		// the store refuses) blocks the deleter, a retryable one is retried.
		d.Status, d.Error, d.UpdatedAt, d.Verification = failedStatus(p.Err), "plan before delete: "+p.Error, r.now(), nil
		d.Attempts++
		if ctx.Err() == nil {
			r.metrics.failures.WithLabelValues(d.Name).Inc()
		}
		_ = r.store.SetDeleterState(ctx, job.ID, r.owner, *d)
	}
	return out
}

func orNone(h string) string {
	if h == "" {
		return "(none)"
	}
	return h
}

// coversJob reports whether p has a part for every deleter of job.
func coversJob(p *Plan, job *Job) bool {
	in := map[string]bool{}
	for _, d := range p.Deleters {
		in[d.Name] = true
	}
	for _, d := range job.Deleters {
		if !in[d.Name] {
			return false
		}
	}
	return true
}
