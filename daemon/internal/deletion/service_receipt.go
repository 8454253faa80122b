package deletion

import (
	"context"
	"errors"
	"fmt"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
)

// Receipt returns the signed receipt of the tenant's latest job, which must
// be COMPLETED and verified; derrors.ErrNotFound otherwise, saying why.
func (s *Service) Receipt(ctx context.Context, tenant string) (*SignedReceipt, error) {
	job, err := s.Latest(ctx, tenant)
	if err != nil {
		return nil, err
	}
	switch {
	case job.Status != JobCompleted:
		return nil, fmt.Errorf("%w: no receipt yet: the latest deletion job of tenant %s (%s) is %s; a receipt is issued when a job is COMPLETED and verified",
			derrors.ErrNotFound, job.TenantID, job.ID, job.Status)
	case !job.Verified:
		return nil, fmt.Errorf("%w: no receipt: job %s of tenant %s completed without verification (deletion.verify = false), and a receipt proves a verified erasure only",
			derrors.ErrNotFound, job.ID, job.TenantID)
	}
	rec, err := s.store.DeletionReceipt(ctx, job.ID)
	if errors.Is(err, derrors.ErrNotFound) {
		return nil, fmt.Errorf("%w: job %s of tenant %s is COMPLETED and verified but has no receipt: it completed before this lifecycled issued receipts, or issuing failed (the daemon's log says why)",
			derrors.ErrNotFound, job.ID, job.TenantID)
	}
	return rec, err
}

// ReceiptKey returns a public key that signed receipts: the one this daemon
// signs with when id is "", else the registered key named id.
func (s *Service) ReceiptKey(ctx context.Context, id string) (*ReceiptKey, error) {
	if id == "" {
		if s.notary == nil {
			return nil, fmt.Errorf("%w: this daemon issues no receipts", derrors.ErrNotFound)
		}
		id = s.notary.KeyID()
	}
	k, err := s.store.ReceiptKey(ctx, id)
	if errors.Is(err, derrors.ErrNotFound) {
		return nil, fmt.Errorf("%w: no receipt key %q is registered in this state store", derrors.ErrNotFound, id)
	}
	return k, err
}
