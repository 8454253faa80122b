package deletion

import (
	"context"

	"github.com/google/uuid"
)

// ReerasureRef names the erasure a re-erase job repeats: re-verification
// found the tenant's data again after that job's erasure (a restored
// backup), and the new job's receipt names it.
type ReerasureRef struct {
	JobID         uuid.UUID
	ReceiptSHA256 string
}

// ReerasureSource is what a JobStore that keeps the erasure ledger also
// does: say which erasure a job repeats. The runner asks it before issuing
// a receipt; a store without a ledger need not implement it.
type ReerasureSource interface {
	// ReerasureOf returns the erasure job id repeats, or nil when it is
	// not a re-erase.
	ReerasureOf(ctx context.Context, jobID uuid.UUID) (*ReerasureRef, error)
}

// reerasureOf fills job.Reerases before its receipt is issued. A failure
// to read it is logged by the caller: the receipt is issued without the
// reference rather than not at all.
func (r *Runner) reerasureOf(ctx context.Context, job *Job) error {
	src, ok := r.store.(ReerasureSource)
	if !ok {
		return nil
	}
	ref, err := src.ReerasureOf(ctx, job.ID)
	if err != nil {
		return err
	}
	job.Reerases = ref
	return nil
}
