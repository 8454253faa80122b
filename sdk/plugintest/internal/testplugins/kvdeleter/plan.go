package kvdeleter

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	d.mu.Lock()
	user := d.dsn.User
	d.mu.Unlock()
	basis := fmt.Sprintf("kvdeleter plan 1\nuser %q\nitems by tenant name, byte for byte\n", user)
	expected := total
	if d.Flaws.PlanFingerprintCounts {
		basis += fmt.Sprintf("count %d\n", total)
	}
	if d.Flaws.PlanMiscounts && expected > 0 {
		expected--
	}
	sum := sha256.Sum256([]byte(basis))
	return &sdk.PlanResponse{
		Steps:       []sdk.PlanStep{{Target: "items", Via: "the store's items under the tenant's name", Expected: expected}},
		Fingerprint: "sha256:" + hex.EncodeToString(sum[:]),
	}, nil
}
