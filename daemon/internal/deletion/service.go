package deletion

import (
	"context"
	"fmt"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
)

// ServiceConfig is read at every call, so a reload takes effect at once.
type ServiceConfig struct {
	TenantIDFormat string
	// GracePeriod is the least time between a deletion request and its
	// start (deletion.grace_period): a job waits in SCHEDULED until then.
	GracePeriod time.Duration
	// RequireApproval keeps new jobs AWAITING_APPROVAL until approved
	// (deletion.require_approval); ApproversDistinct refuses an approval
	// by the requester's uid (deletion.approvers_distinct).
	RequireApproval   bool
	ApproversDistinct bool
}

// ServiceOptions configure a Service.
type ServiceOptions struct {
	Config func() ServiceConfig
	// Notary names this daemon's receipt key; nil: receipts are not issued.
	Notary Notary
}

// Service is what the admin API calls for tenants.
type Service struct {
	store  JobStore
	reg    *Registry
	runner *Runner
	cfg    func() ServiceConfig
	notary Notary
	now    func() time.Time
}

// NewService wires the tenant operations; runner may be nil (no jobs run).
func NewService(store JobStore, reg *Registry, runner *Runner, o ServiceOptions) *Service {
	return &Service{store: store, reg: reg, runner: runner, cfg: o.Config, notary: o.Notary, now: time.Now}
}

// MaxSchedule bounds how far ahead a deletion may be scheduled.
const MaxSchedule = 366 * 24 * time.Hour

// MaxBulkTenants bounds the tenants of one bulk request.
const MaxBulkTenants = 10000

// StartOptions shape a deletion request.
type StartOptions struct {
	// NotBefore asks the job to wait until then; the grace period applies
	// when it is later (a request cannot shorten it).
	NotBefore *time.Time
	// UID is the caller's, for the audit trail.
	UID *int64
	// PlanHash is the plan the caller saw; when set, the plan now must
	// have it, or nothing is queued (PlanChangedError).
	PlanHash string
}

// Counts is the dry run: what each deleter would delete now. The report
// names the tenant by its canonical id, which is what the deleters counted.
func (s *Service) Counts(ctx context.Context, tenant string) (CountReport, error) {
	tenant, err := s.canonical(tenant)
	if err != nil {
		return CountReport{}, err
	}
	return s.reg.CountAll(ctx, tenant), nil
}

func (s *Service) canonical(tenant string) (string, error) {
	return CanonicalTenantID(tenant, s.cfg().TenantIDFormat)
}

// forTenant is fn's answer for the canonical spelling of tenant.
func forTenant[T any](s *Service, tenant string, fn func(canonical string) (T, error)) (T, error) {
	t, err := s.canonical(tenant)
	if err != nil {
		var zero T
		return zero, err
	}
	return fn(t)
}

// StartDeletion creates a job for tenant (stored under its canonical id),
// or returns its active one; a held tenant is refused with an OnHoldError.
func (s *Service) StartDeletion(ctx context.Context, tenant string, o StartOptions) (*Job, bool, error) {
	res, err := s.StartDeletions(ctx, []string{tenant}, o)
	if err != nil {
		var inv *InvalidTenantsError
		if asInvalid(err, &inv) {
			return nil, false, inv.Problems[0].Err
		}
		return nil, false, err
	}
	if res[0].Hold != nil {
		return nil, false, &OnHoldError{Hold: res[0].Hold}
	}
	return res[0].Job, res[0].Created, nil
}

// StartDeletions queues a deletion for each tenant in one write, as
// StartDeletion does for one. Ids are checked first: if any is invalid,
// nothing is queued and the error lists every invalid one by its index.
// A held tenant gets its hold instead of a job; the others are queued.
func (s *Service) StartDeletions(ctx context.Context, tenants []string, o StartOptions) ([]JobCreated, error) {
	if len(tenants) == 0 {
		return nil, fmt.Errorf("%w: no tenant ids given", derrors.ErrInvalid)
	}
	if len(tenants) > MaxBulkTenants {
		return nil, fmt.Errorf("%w: %d tenant ids in one request; at most %d (split the list)", derrors.ErrInvalid, len(tenants), MaxBulkTenants)
	}
	now := s.now()
	notBefore, err := s.notBefore(now, o.NotBefore)
	if err != nil {
		return nil, err
	}
	reqs := make([]JobRequest, len(tenants))
	var bad []TenantProblem
	for i, t := range tenants {
		id, err := s.canonical(t)
		if err != nil {
			bad = append(bad, TenantProblem{Index: i, TenantID: t, Err: err})
			continue
		}
		reqs[i] = JobRequest{Tenant: id, NotBefore: notBefore, UID: o.UID}
	}
	if len(bad) > 0 {
		return nil, &InvalidTenantsError{Problems: bad}
	}
	names := s.reg.Names()
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: no [[deleter]] is configured, so there is nothing to delete with", derrors.ErrConflict)
	}
	planHash, err := s.planForJobs(ctx, reqs[0].Tenant, o.PlanHash)
	if err != nil {
		return nil, err
	}
	// Planning takes the deleters' time: the grace period counts from when
	// the jobs are stored, not from when the request came in.
	now = s.now()
	if notBefore, err = s.notBefore(now, o.NotBefore); err != nil {
		return nil, err
	}
	approval := s.cfg().RequireApproval
	for i := range reqs {
		reqs[i].NotBefore, reqs[i].PlanHash, reqs[i].RequireApproval = notBefore, planHash, approval
	}
	res, err := s.store.CreateDeletionJobs(ctx, reqs, names, now)
	if err != nil {
		return nil, err
	}
	if s.runner != nil {
		s.runner.Kick()
	}
	return res, nil
}

// notBefore is when a job requested now may start: the grace period after
// now, or the requested time if that is later; nil when at once.
func (s *Service) notBefore(now time.Time, requested *time.Time) (*time.Time, error) {
	if requested != nil && requested.After(now.Add(MaxSchedule)) {
		return nil, fmt.Errorf("%w: not_before %s is more than %d days ahead", derrors.ErrInvalid,
			requested.UTC().Format(time.RFC3339), int(MaxSchedule.Hours()/24))
	}
	at := now.Add(s.cfg().GracePeriod)
	if requested != nil && requested.After(at) {
		at = *requested
	}
	if !at.After(now) {
		return nil, nil
	}
	at = at.UTC()
	return &at, nil
}

// Latest returns the tenant's most recent job, whatever spelling of the
// id the caller used.
func (s *Service) Latest(ctx context.Context, tenant string) (*Job, error) {
	return forTenant(s, tenant, func(t string) (*Job, error) { return s.store.LatestDeletionJob(ctx, t) })
}

// Jobs lists jobs newest first, one page at a time.
func (s *Service) Jobs(ctx context.Context, f JobFilter) (JobPage, error) {
	jobs, next, err := listPage(s, &f.Tenant, &f.Limit,
		func() ([]*Job, error) { return s.store.ListDeletionJobs(ctx, f) },
		func(j *Job) Cursor { return Cursor{At: j.CreatedAt, ID: j.ID} })
	if err != nil {
		return JobPage{}, err
	}
	return JobPage{Jobs: jobs, Next: next}, nil
}

func pageLimit(n int) int {
	switch {
	case n <= 0:
		return DefaultPageSize
	case n > MaxPageSize:
		return MaxPageSize
	default:
		return n
	}
}
