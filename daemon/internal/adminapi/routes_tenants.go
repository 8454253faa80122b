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
		mux.HandleFunc("GET /api/v1/tenants/{tenant}/counts", func(w http.ResponseWriter, r *http.Request) {
			rep, err := svc.Counts(r.Context(), r.PathValue("tenant"))
			if err != nil {
				writeError(w, r, ScopeTenant, err)
				return
			}
			writeJSON(w, http.StatusOK, wire.Counts{TenantID: rep.TenantID, Counts: rep.Counts, Breakdown: rep.Breakdown,
				Total: rep.Total(), Complete: rep.Complete(), Failed: rep.Failed})
		})
		mux.HandleFunc("POST /api/v1/tenants/{tenant}/deletion", func(w http.ResponseWriter, r *http.Request) {
			if err := strictRequest(r, bodyAllowed); err != nil {
				writeError(w, r, ScopeTenant, err)
				return
			}
			var body wire.DeletionRequest
			if _, err := decodeBody(r, &body, `empty or {"not_before": "<RFC 3339 time>", "plan_hash": "<the plan hash read>"}`); err != nil {
				writeError(w, r, ScopeTenant, err)
				return
			}
			notBefore, err := parseNotBefore(body.NotBefore)
			if err != nil {
				writeError(w, r, ScopeTenant, err)
				return
			}
			planHash, err := parsePlanHash(body.PlanHash)
			if err != nil {
				writeError(w, r, ScopeTenant, err)
				return
			}
			job, created, err := svc.StartDeletion(r.Context(), r.PathValue("tenant"),
				deletion.StartOptions{NotBefore: notBefore, UID: callerUID(r), PlanHash: planHash})
			if err != nil {
				writeError(w, r, ScopeTenant, err)
				return
			}
			w.Header().Set("Location", "/api/v1/tenants/"+escapePath(job.TenantID)+"/deletion")
			if !created {
				w.Header().Set("X-Existing-Job", "true")
			}
			writeJSON(w, http.StatusAccepted, JobBody(job))
		})
		mux.HandleFunc("GET /api/v1/tenants/{tenant}/deletion", func(w http.ResponseWriter, r *http.Request) {
			job, err := svc.Latest(r.Context(), r.PathValue("tenant"))
			if err != nil {
				writeError(w, r, ScopeTenant, err)
				return
			}
			writeJSON(w, http.StatusOK, JobBody(job))
		})
		mux.HandleFunc("POST /api/v1/tenants/{tenant}/deletion/cancel", func(w http.ResponseWriter, r *http.Request) {
			if err := strictRequest(r, bodyAllowed); err != nil {
				writeError(w, r, ScopeTenant, err)
				return
			}
			var empty struct{}
			if _, err := decodeBody(r, &empty, "empty"); err != nil {
				writeError(w, r, ScopeTenant, err)
				return
			}
			job, outcome, err := svc.Cancel(r.Context(), r.PathValue("tenant"), callerUID(r))
			if err != nil {
				writeError(w, r, ScopeTenant, err)
				return
			}
			if l := loggerFrom(r); l != nil {
				l.Info("deletion job cancel", "tenant_id", job.TenantID, "job_id", job.ID.String(), "status", job.Status,
					"stopping", outcome == deletion.CancelRequested, "uid", uidField(callerUID(r)), "request_id", requestID(r))
			}
			writeJSON(w, http.StatusOK, JobBody(job))
		})
		retryRoute(mux, svc)
		mux.HandleFunc("GET /api/v1/tenants/{tenant}/deletions", func(w http.ResponseWriter, r *http.Request) {
			f, err := parseJobQuery(r.URL.Query(), false)
			if err != nil {
				writeError(w, r, ScopeTenant, err)
				return
			}
			f.Tenant = r.PathValue("tenant")
			page, err := svc.Jobs(r.Context(), f)
			if err != nil {
				writeError(w, r, ScopeTenant, err)
				return
			}
			body := wire.TenantJobs{JobPage: jobsBody(page), Resurrections: []wire.Resurrection{}}
			if res != nil {
				rs, err := res.Resurrections(r.Context(), f.Tenant)
				if err != nil {
					writeError(w, r, ScopeTenant, err)
					return
				}
				for _, x := range rs {
					body.Resurrections = append(body.Resurrections, resurrectionJSON(x))
				}
			}
			writeJSON(w, http.StatusOK, body)
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
