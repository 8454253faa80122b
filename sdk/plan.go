package sdk

import "context"

// PlanRequest asks what Delete would delete for a tenant now.
type PlanRequest struct {
	TenantID string
}

// PlanStep is one part of a deletion: one table, key pattern or DynamoDB
// table, in the order Delete works through them.
type PlanStep struct {
	// Target is what is deleted from: "public.orders", "tenant:{id}:*",
	// "sessions". It names the same thing as the key of Count's breakdown.
	Target string
	// Via says how the tenant's items are reached: "tenant column
	// tenant_id", "FK orders.customer_id -> customers", "SCAN MATCH
	// tenant:{id}:*", "Query on hash key tenant_id". It does not contain the
	// tenant id, so that the same schema gives the same plan text.
	Via string
	// Expected is how many items Delete would delete here now.
	Expected int64
}

// PlanResponse is a deletion plan.
type PlanResponse struct {
	// Steps in delete order.
	Steps []PlanStep
	// Fingerprint is a hash of the schema or configuration the plan was
	// computed from (tables, columns, foreign keys, patterns, key schema)
	// and of which store it is (a database's identity, a server's address,
	// a table's ARN), so that an approved plan does not apply to another
	// store with the same schema. It must be the same for every tenant and
	// every count, and change when what would be deleted, where, or how,
	// changes: the daemon refuses a job whose plan at start has another
	// fingerprint than the approved one, and sends it with Delete
	// (DeleteRequest.PlanFingerprint). Fingerprints computes one from lines.
	Fingerprint string
	// Notes are for the operator (indexes considered, tables ignored).
	Notes []string
}

// Total is the sum of the steps' expected counts.
func (p *PlanResponse) Total() int64 {
	var n int64
	for _, s := range p.Steps {
		n += s.Expected
	}
	return n
}

// Planner is implemented by a TenantDeleter that can say, before deleting,
// what it would delete and how. It is optional: the gRPC server answers
// Unsupported for a deleter that does not implement it, and so does a
// plugin built before the Plan RPC existed.
type Planner interface {
	// Plan returns the deletion plan for a tenant. Like Count it must not
	// modify anything, and its steps' Expected must add up to what Count
	// returns at the same moment. It fails closed: when the store no longer
	// matches the config (a table with the tenant column that nobody listed,
	// a changed key schema) it returns an error naming the difference rather
	// than a plan that would miss data.
	Plan(ctx context.Context, req *PlanRequest) (*PlanResponse, error)
}
