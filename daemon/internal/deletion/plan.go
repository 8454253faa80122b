package deletion

import (
	"context"
	"errors"
	"sync"

	"github.com/lifecycled/lifecycled/sdk"
)

// PlanOutcome is what one deleter answered when asked for its plan.
type PlanOutcome string

// Plan outcomes. planned: the deleter returned its plan. unsupported: its
// plugin cannot plan (not a sdk.Planner, or built before the Plan RPC); it
// still deletes, but the plan says nothing of how, so no drift of its own
// can be seen. failed: it could not plan now (its store is down, or it
// refused because the store no longer matches its config).
const (
	PlanPlanned     PlanOutcome = "planned"
	PlanUnsupported PlanOutcome = "unsupported"
	PlanFailed      PlanOutcome = "failed"
)

// PlanStep is one part of a deleter's plan: a table, key pattern or
// DynamoDB table, how the tenant's items are reached there, and how many
// there are now.
type PlanStep struct {
	Target   string
	Via      string
	Expected int64
}

// DeleterPlan is one deleter's answer.
type DeleterPlan struct {
	Name        string
	Outcome     PlanOutcome
	Fingerprint string
	Steps       []PlanStep
	Notes       []string
	// Error and Err say why a FAILED deleter could not plan.
	Error string
	Err   error
}

// Expected sums the steps' counts.
func (d DeleterPlan) Expected() int64 {
	var n int64
	for _, s := range d.Steps {
		n += s.Expected
	}
	return n
}

// storeChanged reports whether a failed plan is the deleter refusing
// because its store no longer matches its config (an unlisted table with
// the tenant column, a changed key schema, a table gone): a change of the
// plan that needs an operator. Other failures (a store that is down, a
// tenant id the store refuses) are the deleter's alone, as a failed count
// would be.
func (d DeleterPlan) storeChanged() bool {
	return d.Outcome == PlanFailed && (errors.Is(d.Err, sdk.ErrInvalidConfig) || errors.Is(d.Err, sdk.ErrNotFound))
}

// Plan is every configured deleter's plan for one tenant.
type Plan struct {
	TenantID string
	// Deleters in config order.
	Deleters []DeleterPlan
	// Hash names the plan's shape (PlanHash); "" when a deleter failed: an
	// incomplete plan has no hash, and cannot be approved.
	Hash string
}

// Complete reports whether no deleter FAILED.
func (p *Plan) Complete() bool {
	for _, d := range p.Deleters {
		if d.Outcome == PlanFailed {
			return false
		}
	}
	return true
}

// Failed lists the deleters that could not plan.
func (p *Plan) Failed() []DeleterPlan {
	var out []DeleterPlan
	for _, d := range p.Deleters {
		if d.Outcome == PlanFailed {
			out = append(out, d)
		}
	}
	return out
}

// PlanSome asks the named deleters for their plans, in parallel like
// counts. A deleter that cannot plan is unsupported, not an error for the
// others.
func (r *Registry) PlanSome(ctx context.Context, tenant string, names []string) *Plan {
	out := make([]DeleterPlan, len(names))
	pos := make(map[string]int, len(names))
	for i, n := range names {
		pos[n] = i
	}
	var mu sync.Mutex
	r.each(ctx, names, func(name string) {
		dp := planOne(ctx, r.src, name, tenant)
		mu.Lock()
		out[pos[name]] = dp
		mu.Unlock()
	})
	p := &Plan{TenantID: tenant, Deleters: out}
	if p.Complete() {
		p.Hash = shapeOf(p).hash()
	}
	return p
}

// PlanAll plans with every configured deleter.
func (r *Registry) PlanAll(ctx context.Context, tenant string) *Plan {
	return r.PlanSome(ctx, tenant, r.src.DeleterNames())
}

func planOne(ctx context.Context, src Deleters, name, tenant string) DeleterPlan {
	dp := DeleterPlan{Name: name}
	d, err := src.Deleter(name)
	if err != nil {
		dp.Outcome, dp.Error, dp.Err = PlanFailed, err.Error(), err
		return dp
	}
	planner, ok := d.(sdk.Planner)
	if !ok {
		dp.Outcome = PlanUnsupported
		return dp
	}
	resp, err := planner.Plan(ctx, &sdk.PlanRequest{TenantID: tenant})
	switch {
	case errors.Is(err, sdk.ErrUnsupported):
		dp.Outcome = PlanUnsupported
		return dp
	case err != nil:
		dp.Outcome, dp.Error, dp.Err = PlanFailed, err.Error(), err
		return dp
	case resp == nil:
		err = sdk.Permanent(errors.New("the plugin returned no plan and no error"))
		dp.Outcome, dp.Error, dp.Err = PlanFailed, err.Error(), err
		return dp
	}
	dp.Outcome, dp.Fingerprint, dp.Notes = PlanPlanned, resp.Fingerprint, append([]string{}, resp.Notes...)
	dp.Steps = make([]PlanStep, 0, len(resp.Steps))
	for _, s := range resp.Steps {
		dp.Steps = append(dp.Steps, PlanStep{Target: s.Target, Via: s.Via, Expected: s.Expected})
	}
	return dp
}
