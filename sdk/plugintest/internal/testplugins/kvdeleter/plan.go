package kvdeleter

import (
	"context"
	"fmt"

	"github.com/lifecycled/lifecycled/sdk"
)

// Plan is one step, the tenant's items, with Count's count. The fingerprint
// hashes what the plan is computed from: the store's user (whose items
// these are) and how items are found, never the tenant or a count.
func (d *Deleter) Plan(ctx context.Context, req *sdk.PlanRequest) (*sdk.PlanResponse, error) {
	if err := d.checkID(req.TenantID); err != nil {
		return nil, err
	}
	total, err := d.count(ctx, req.TenantID)
	if err != nil {
		return nil, err
	}
	expected := total
	if d.Flaws.PlanMiscounts && expected > 0 {
		expected--
	}
	return &sdk.PlanResponse{
		Steps:       []sdk.PlanStep{{Target: "items", Via: "the store's items under the tenant's name", Expected: expected}},
		Fingerprint: d.fps.Of(d.planLines(total)),
	}, nil
}

func (d *Deleter) planLines(total int64) []string {
	d.mu.Lock()
	user := d.dsn.User
	d.mu.Unlock()
	lines := []string{"kvdeleter plan 2", fmt.Sprintf("user %q", user), "items by tenant name, byte for byte"}
	if d.Flaws.PlanFingerprintCounts {
		lines = append(lines, fmt.Sprintf("count %d", total))
	}
	return lines
}

// checkPlan is the start of Delete: the daemon's checked fingerprint must
// be the one of what Delete deletes with now.
func (d *Deleter) checkPlan(ctx context.Context, req *sdk.DeleteRequest) error {
	if req.PlanFingerprint == "" || d.Flaws.IgnorePlanFingerprint {
		return nil
	}
	var total int64
	if d.Flaws.PlanFingerprintCounts {
		var err error
		if total, err = d.count(ctx, req.TenantID); err != nil {
			return err
		}
	}
	return d.fps.Check(req.PlanFingerprint, d.planLines(total))
}
