package wire

import "github.com/lifecycled/lifecycled/daemon/internal/deletion"

// Plan is GET /api/v1/tenants/{tenant}/plan: what every configured
// deleter would delete for the tenant now, and how.
type Plan struct {
	// TenantID is the canonical id that was planned.
	TenantID string `json:"tenant_id"`
	// PlanHash names the plan's shape (deleters, fingerprints, targets and
	// vias; not counts): what a deletion request's plan_hash and an
	// approval name. Null when a deleter failed: an incomplete plan cannot
	// be approved.
	PlanHash *string `json:"plan_hash"`
	Complete bool    `json:"complete"`
	// ExpectedTotal sums the planned deleters' expected counts.
	ExpectedTotal int64         `json:"expected_total"`
	Deleters      []DeleterPlan `json:"deleters"`
}

// DeleterPlan is one deleter's plan.
type DeleterPlan struct {
	Name string `json:"name"`
	// Status is planned, unsupported (the plugin cannot plan: it still
	// deletes, but its part of the plan is unknown) or failed (error says why).
	Status      deletion.PlanOutcome `json:"status"`
	Fingerprint *string              `json:"fingerprint"`
	// Expected sums the steps; null unless planned.
	Expected *int64     `json:"expected"`
	Steps    []PlanStep `json:"steps"`
	Notes    []string   `json:"notes"`
	Error    string     `json:"error,omitempty"`
}

// PlanStep is one step of a deleter's plan, in delete order.
type PlanStep struct {
	Target   string `json:"target"`
	Via      string `json:"via"`
	Expected int64  `json:"expected"`
}
