package adminapi

import "github.com/lifecycled/lifecycled/daemon/internal/deletion"

// PlanBody is GET /api/v1/tenants/{tenant}/plan: what every configured
// deleter would delete for the tenant now, and how.
type PlanBody struct {
	// TenantID is the canonical id that was planned.
	TenantID string `json:"tenant_id"`
	// PlanHash names the plan's shape (deleters, fingerprints, targets and
	// vias; not counts): what a deletion request's plan_hash and an
	// approval name. Null when a deleter failed: an incomplete plan cannot
	// be approved.
	PlanHash *string `json:"plan_hash"`
	Complete bool    `json:"complete"`
	// ExpectedTotal sums the planned deleters' expected counts.
	ExpectedTotal int64             `json:"expected_total"`
	Deleters      []DeleterPlanJSON `json:"deleters"`
}

// DeleterPlanJSON is one deleter's plan.
type DeleterPlanJSON struct {
	Name string `json:"name"`
	// Status is planned, unsupported (the plugin cannot plan: it still
	// deletes, but its part of the plan is unknown) or failed (error says why).
	Status      deletion.PlanOutcome `json:"status"`
	Fingerprint *string              `json:"fingerprint"`
	// Expected sums the steps; null unless planned.
	Expected *int64         `json:"expected"`
	Steps    []PlanStepJSON `json:"steps"`
	Notes    []string       `json:"notes"`
	Error    string         `json:"error,omitempty"`
}

// PlanStepJSON is one step of a deleter's plan, in delete order.
type PlanStepJSON struct {
	Target   string `json:"target"`
	Via      string `json:"via"`
	Expected int64  `json:"expected"`
}

func planBody(p *deletion.Plan) PlanBody {
	out := PlanBody{TenantID: p.TenantID, Complete: p.Complete(), Deleters: make([]DeleterPlanJSON, 0, len(p.Deleters))}
	if p.Hash != "" {
		h := p.Hash
		out.PlanHash = &h
	}
	for _, d := range p.Deleters {
		dj := DeleterPlanJSON{Name: d.Name, Status: d.Outcome, Steps: []PlanStepJSON{}, Notes: []string{}, Error: d.Error}
		if d.Outcome == deletion.PlanPlanned {
			fp, n := d.Fingerprint, d.Expected()
			dj.Fingerprint, dj.Expected = &fp, &n
			out.ExpectedTotal += n
			dj.Notes = append(dj.Notes, d.Notes...)
			for _, s := range d.Steps {
				dj.Steps = append(dj.Steps, PlanStepJSON{Target: s.Target, Via: s.Via, Expected: s.Expected})
			}
		}
		out.Deleters = append(out.Deleters, dj)
	}
	return out
}
