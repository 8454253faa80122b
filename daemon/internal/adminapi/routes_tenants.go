package adminapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/ledger"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

// Tenants is what the tenant erasure routes need.
type Tenants interface {
	Counts(ctx context.Context, tenant string) (deletion.CountReport, error)
	StartDeletion(ctx context.Context, tenant string, o deletion.StartOptions) (*deletion.Job, bool, error)
	StartDeletions(ctx context.Context, tenants []string, o deletion.StartOptions) ([]deletion.JobCreated, error)
	Latest(ctx context.Context, tenant string) (*deletion.Job, error)
	Jobs(ctx context.Context, f deletion.JobFilter) (deletion.JobPage, error)
	Cancel(ctx context.Context, tenant string, uid *int64) (*deletion.Job, deletion.CancelOutcome, error)
	Retry(ctx context.Context, tenant string) (*deletion.Job, error)
}

func jobsBody(p deletion.JobPage) wire.JobPage {
	out := wire.JobPage{Jobs: make([]wire.Job, 0, len(p.Jobs))}
	for _, j := range p.Jobs {
		out.Jobs = append(out.Jobs, JobBody(j))
	}
	if p.Next != nil {
		s := p.Next.String()
		out.NextCursor = &s
	}
	return out
}

// Resurrections is what GET /api/v1/tenants/{tenant}/deletions adds from
// the erasure ledger.
type Resurrections interface {
	Resurrections(ctx context.Context, tenant string) ([]*ledger.Resurrection, error)
}

// TenantRoutes serves the tenant erasure routes.
func TenantRoutes(svc Tenants) func(*http.ServeMux) { return TenantRoutesWith(svc, nil) }

// TenantRoutesWith serves the tenant erasure routes; the tenant's job list
// also shows res's resurrections of the tenant (none when res is nil).
func TenantRoutesWith(svc Tenants, res Resurrections) func(*http.ServeMux) {
	return func(mux *http.ServeMux) {
		g := routeGroup{mux: mux, scope: ScopeTenant}
		g.handle("GET /api/v1/tenants/{tenant}/counts", func(r *http.Request) (any, error) {
			rep, err := svc.Counts(r.Context(), r.PathValue("tenant"))
			if err != nil {
				return nil, err
			}
			return wire.Counts{TenantID: rep.TenantID, Counts: rep.Counts, Breakdown: rep.Breakdown,
				Total: rep.Total(), Complete: rep.Complete(), Failed: rep.Failed}, nil
		})
		g.handle("POST /api/v1/tenants/{tenant}/deletion", func(r *http.Request) (any, error) {
			if err := strictRequest(r, bodyAllowed); err != nil {
				return nil, err
			}
			var body wire.DeletionRequest
			if _, err := decodeBody(r, &body, `empty or {"not_before": "<RFC 3339 time>", "plan_hash": "<the plan hash read>"}`); err != nil {
				return nil, err
			}
			notBefore, err := parseNotBefore(body.NotBefore)
			if err != nil {
				return nil, err
			}
			planHash, err := parsePlanHash(body.PlanHash)
			if err != nil {
				return nil, err
			}
			job, created, err := svc.StartDeletion(r.Context(), r.PathValue("tenant"),
				deletion.StartOptions{NotBefore: notBefore, UID: callerUID(r), PlanHash: planHash})
			if err != nil {
				return nil, err
			}
			a := accepted(JobBody(job), "Location", "/api/v1/tenants/"+escapePath(job.TenantID)+"/deletion")
			if !created {
				a.header.Set("X-Existing-Job", "true")
			}
			return a, nil
		})
		g.handle("GET /api/v1/tenants/{tenant}/deletion", func(r *http.Request) (any, error) {
			job, err := svc.Latest(r.Context(), r.PathValue("tenant"))
			if err != nil {
				return nil, err
			}
			return JobBody(job), nil
		})
		g.handle("POST /api/v1/tenants/{tenant}/deletion/cancel", func(r *http.Request) (any, error) {
			if err := strictRequest(r, bodyAllowed); err != nil {
				return nil, err
			}
			var empty struct{}
			if _, err := decodeBody(r, &empty, "empty"); err != nil {
				return nil, err
			}
			job, outcome, err := svc.Cancel(r.Context(), r.PathValue("tenant"), callerUID(r))
			if err != nil {
				return nil, err
			}
			if l := loggerFrom(r); l != nil {
				l.Info("deletion job cancel", "tenant_id", job.TenantID, "job_id", job.ID.String(), "status", job.Status,
					"stopping", outcome == deletion.CancelRequested, "uid", uidField(callerUID(r)), "request_id", requestID(r))
			}
			return JobBody(job), nil
		})
		retryRoute(g, svc)
		g.handle("GET /api/v1/tenants/{tenant}/deletions", func(r *http.Request) (any, error) {
			f, err := parseJobQuery(r.URL.Query(), false)
			if err != nil {
				return nil, err
			}
			f.Tenant = r.PathValue("tenant")
			page, err := svc.Jobs(r.Context(), f)
			if err != nil {
				return nil, err
			}
			body := wire.TenantJobs{JobPage: jobsBody(page), Resurrections: []wire.Resurrection{}}
			if res != nil {
				rs, err := res.Resurrections(r.Context(), f.Tenant)
				if err != nil {
					return nil, err
				}
				for _, x := range rs {
					body.Resurrections = append(body.Resurrections, resurrectionJSON(x))
				}
			}
			return body, nil
		})
	}
}

// uidField is a uid for a log line: -1 when unknown.
func uidField(uid *int64) int64 {
	if uid == nil {
		return -1
	}
	return *uid
}

// CanonicalTenantURI returns what the Idempotency-Key fingerprint covers of
// a request's target: under /api/v1/tenants/ the {tenant} segment in its
// canonical spelling, elsewhere the request URI as sent. The same key sent
// for the same tenant in another spelling is then the same request (a
// replay of the same job), not a mismatch. An id the format refuses is
// left as sent: the route answers 400 for it anyway.
func CanonicalTenantURI(format func() string) func(*http.Request) string {
	const prefix = "/api/v1/tenants/"
	return func(r *http.Request) string {
		rest, ok := strings.CutPrefix(r.URL.Path, prefix)
		if !ok {
			return r.URL.RequestURI()
		}
		tenant, tail, hasTail := strings.Cut(rest, "/")
		id, err := deletion.CanonicalTenantID(tenant, format())
		if err != nil || id == tenant {
			return r.URL.RequestURI()
		}
		u := *r.URL
		u.Path, u.RawPath = prefix+id, ""
		if hasTail {
			u.Path += "/" + tail
		}
		return u.RequestURI()
	}
}
