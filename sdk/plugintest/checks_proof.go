package plugintest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lifecycled/lifecycled/sdk"
)

// Verify records the plugin's Verify like every other call (its errors
// are checked for secrets); a deleter that is not an sdk.Verifier answers
// Unsupported, as the gRPC server does.
func (r *recorder) Verify(ctx context.Context, req *sdk.VerifyRequest) (*sdk.VerifyResponse, error) {
	return recordOptional(r, "Verify", req.TenantID, "sdk.Verifier", func(v sdk.Verifier) (*sdk.VerifyResponse, error) {
		return v.Verify(ctx, req)
	})
}

// verify calls the plugin's Verify; ok is false when the plugin has no
// independent proof (sdk.Verifier is optional).
func (k *kit) verify(t *testing.T, tenant string) (resp *sdk.VerifyResponse, ok bool) {
	t.Helper()
	resp, err := k.d.Verify(ctxFor(t, time.Minute), &sdk.VerifyRequest{TenantID: tenant})
	if errors.Is(err, sdk.ErrUnsupported) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("Verify(%q): %v", tenant, err)
	}
	return resp, true
}

// proofBefore checks that the proof is not vacuous: before anything is
// deleted it finds the seeded tenant's items (a proof that never finds
// anything proves nothing).
func (k *kit) proofBefore(t *testing.T, tenant string, seeded int64) {
	resp, ok := k.verify(t, tenant)
	if !ok {
		t.Skip("the plugin has no independent proof (sdk.Verifier): the daemon verifies it with Count")
	}
	if seeded > 0 && resp.Left() == 0 {
		t.Errorf("Verify(%q) before Delete found nothing left, though %d items are seeded: a proof that cannot find the tenant's items proves nothing (checks: %+v)",
			tenant, seeded, resp.Checks)
	}
	for _, c := range resp.Checks {
		if c.Found < 0 {
			t.Errorf("Verify(%q): check %s %s found %d, which is no count", tenant, c.Kind, c.Target, c.Found)
		}
	}
}

// proofAfter checks the proof once A is deleted: Delete's own checks and
// Verify find nothing of A, and Verify still finds B's items.
func (k *kit) proofAfter(t *testing.T, deleted *sdk.DeleteResponse, a, b string, seededB int64) {
	resp, ok := k.verify(t, a)
	if !ok {
		t.Skip("the plugin has no independent proof (sdk.Verifier): the daemon verifies it with Count")
	}
	if deleted != nil {
		if len(deleted.Proof) == 0 {
			t.Errorf("Delete(A) of a Verifier reported no proof of its own (DeleteResponse.Proof): record the identities of what it deletes and look them up after")
		}
		if n := sdk.ProofLeft(deleted.Proof); n > 0 {
			t.Errorf("Delete(A) succeeded with a proof that found %d left: %+v (a Delete whose proof finds anything must fail)", n, deleted.Proof)
		}
	}
	if n := resp.Left(); n > 0 {
		t.Errorf("Verify(A) after Delete found %d left: %+v", n, resp.Checks)
	}
	rb, _ := k.verify(t, b)
	if seededB > 0 && rb.Left() == 0 {
		t.Errorf("Verify(B) after deleting A found nothing of B, whose %d items are still there: %+v", seededB, rb.Checks)
	}
}
