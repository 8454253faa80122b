package deletion

import (
	"context"
	"fmt"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
)

// Service is what the admin API calls for tenants.
type Service struct {
	store  JobStore
	reg    *Registry
	runner *Runner
	format func() string
	now    func() time.Time
}

// NewService wires the tenant operations.
func NewService(store JobStore, reg *Registry, runner *Runner, format func() string) *Service {
	return &Service{store: store, reg: reg, runner: runner, format: format, now: time.Now}
}

// Counts is the dry run: what each deleter would delete now. The report
// names the tenant by its canonical id, which is what the deleters counted.
func (s *Service) Counts(ctx context.Context, tenant string) (CountReport, error) {
	tenant, err := CanonicalTenantID(tenant, s.format())
	if err != nil {
		return CountReport{}, err
	}
	return s.reg.CountAll(ctx, tenant), nil
}

// StartDeletion creates a job for tenant (stored under its canonical id),
// or returns its active one.
func (s *Service) StartDeletion(ctx context.Context, tenant string) (*Job, bool, error) {
	tenant, err := CanonicalTenantID(tenant, s.format())
	if err != nil {
		return nil, false, err
	}
	names := s.reg.Names()
	if len(names) == 0 {
		return nil, false, fmt.Errorf("%w: no [[deleter]] is configured, so there is nothing to delete with", derrors.ErrConflict)
	}
	job, created, err := s.store.CreateDeletionJob(ctx, tenant, names, s.now())
	if err != nil {
		return nil, false, err
	}
	if created && s.runner != nil {
		s.runner.Kick()
	}
	return job, created, nil
}

// Latest returns the tenant's most recent job, whatever spelling of the
// id the caller used.
func (s *Service) Latest(ctx context.Context, tenant string) (*Job, error) {
	tenant, err := CanonicalTenantID(tenant, s.format())
	if err != nil {
		return nil, err
	}
	return s.store.LatestDeletionJob(ctx, tenant)
}
