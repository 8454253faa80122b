package sdk

import (
	"context"
	"fmt"
	"strings"
)

// ProofKind says what a proof check looked for.
type ProofKind string

// The kinds of proof check. Every kind but ProofKept counts as left when it
// finds anything: an erasure is verified only when each of them found 0.
const (
	// ProofIdentities: items whose identity (primary key, another unique
	// key, or the whole row) Delete recorded before deleting, looked up
	// after it. Found is how many are still there: a trigger or rule kept
	// them, a cascade did not run. Checked is how many were recorded.
	ProofIdentities ProofKind = "identities"
	// ProofTenantItems: items holding the tenant id, counted by re-reading
	// the store's catalogue (every table with the tenant column in any
	// case, listed or not), not by the deletion's own model.
	ProofTenantItems ProofKind = "tenant_items"
	// ProofOrphans: items that reference, through a foreign key, an item
	// the erasure removed: a key action that did not run.
	ProofOrphans ProofKind = "orphans"
	// ProofKept: the tenant's items in what the config keeps on purpose
	// (ignore_tables): reported, never counted as left.
	ProofKept ProofKind = "kept"
)

// ProofCheck is one check of an independent proof.
type ProofCheck struct {
	Kind ProofKind
	// Target is what was checked: a table ("public.orders"), or a foreign
	// key ("public.lines.order_id -> public.orders").
	Target string
	// Checked is how many items the check looked for (identities recorded,
	// parents removed); 0 when it counted a whole table.
	Checked int64
	// Found is how many it found: left behind, or kept for ProofKept.
	Found int64
	// Detail says anything the numbers do not (why a table could not be
	// read fully, which trigger kept rows).
	Detail string
}

// Left reports whether the check found something an erasure should have
// removed.
func (c ProofCheck) Left() bool { return c.Kind != ProofKept && c.Found != 0 }

// VerifyRequest asks for an independent proof that a tenant is gone.
type VerifyRequest struct {
	TenantID string
}

// VerifyResponse is what Verify found.
type VerifyResponse struct {
	Checks []ProofCheck
}

// Left sums what the checks found left (ProofKept excluded).
func (r *VerifyResponse) Left() int64 { return ProofLeft(r.Checks) }

// ProofLeft sums what checks found left (ProofKept excluded).
func ProofLeft(checks []ProofCheck) int64 {
	var n int64
	for _, c := range checks {
		if c.Left() {
			n += c.Found
		}
	}
	return n
}

// ProofFailure is the permanent error a Delete returns when its proof found
// rows left (ProofLeft > 0), naming each check that found some: the daemon
// marks the job BLOCKED and signs no receipt.
func ProofFailure(checks []ProofCheck) error {
	var parts []string
	for _, c := range checks {
		if !c.Left() {
			continue
		}
		switch c.Kind {
		case ProofIdentities:
			parts = append(parts, fmt.Sprintf("%d of the %d rows of %s recorded before the delete are %s", c.Found, c.Checked, c.Target, c.Detail))
		default:
			parts = append(parts, fmt.Sprintf("%d rows reference removed rows through %s: %s", c.Found, c.Target, c.Detail))
		}
	}
	return Permanent(fmt.Errorf("the erasure's independent proof found rows left: %s", strings.Join(parts, "; ")))
}

// Verifier is implemented by a TenantDeleter that can prove an erasure by a
// path independent of its deletion: not by re-running the predicates Delete
// deleted with, nor trusting the settings it ran under, but by re-reading
// the store's catalogue and looking for the tenant's items wherever they
// could be. Its Delete records the identity of every item it is about to
// remove and, once done, reports in DeleteResponse.Proof whether any of them
// (or any item referencing one) is still there.
//
// It is optional: the daemon verifies a deleter without it by calling
// Count, and says so in the job and the receipt ("count", not
// "independent").
type Verifier interface {
	// Verify looks for the tenant's items now. Like Count it must not
	// modify anything. An error means nothing could be proven (the store
	// is down): the daemon treats it as a failed verification.
	Verify(ctx context.Context, req *VerifyRequest) (*VerifyResponse, error)
}
