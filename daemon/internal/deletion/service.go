package deletion

import (
	"context"
	"fmt"
	"regexp"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
)

// MaxTenantIDLength bounds tenant ids whatever the configured format.
const MaxTenantIDLength = 255

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// ValidateTenantID checks an id against tenant_id_format ("uuid" or an
// anchored regular expression) before any plugin sees it.
func ValidateTenantID(id, format string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: tenant id is empty", derrors.ErrInvalid)
	case len(id) > MaxTenantIDLength:
		return fmt.Errorf("%w: tenant id is %d bytes long (at most %d)", derrors.ErrInvalid, len(id), MaxTenantIDLength)
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: tenant id is not valid UTF-8", derrors.ErrInvalid)
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: tenant id contains a control character", derrors.ErrInvalid)
		}
	}
	if format == "" || format == "uuid" {
		if !uuidRE.MatchString(id) {
			return fmt.Errorf("%w: tenant id %q is not a UUID (daemon.tenant_id_format = \"uuid\")", derrors.ErrInvalid, id)
		}
		return nil
	}
	re, err := regexp.Compile(format)
	if err != nil {
		return fmt.Errorf("tenant_id_format: %w", err)
	}
	if !re.MatchString(id) {
		return fmt.Errorf("%w: tenant id %q does not match daemon.tenant_id_format %s", derrors.ErrInvalid, id, format)
	}
	return nil
}

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

// Counts is the dry run: what each deleter would delete now.
func (s *Service) Counts(ctx context.Context, tenant string) (CountReport, error) {
	if err := ValidateTenantID(tenant, s.format()); err != nil {
		return CountReport{}, err
	}
	return s.reg.CountAll(ctx, tenant), nil
}

// StartDeletion creates a job for tenant, or returns its active one.
func (s *Service) StartDeletion(ctx context.Context, tenant string) (*Job, bool, error) {
	if err := ValidateTenantID(tenant, s.format()); err != nil {
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

// Latest returns the tenant's most recent job.
func (s *Service) Latest(ctx context.Context, tenant string) (*Job, error) {
	if err := ValidateTenantID(tenant, s.format()); err != nil {
		return nil, err
	}
	return s.store.LatestDeletionJob(ctx, tenant)
}
