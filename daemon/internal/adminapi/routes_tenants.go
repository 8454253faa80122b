package adminapi

import (
	"context"
	"net/http"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
)

// Tenants is what the tenant routes need.
type Tenants interface {
	Counts(ctx context.Context, tenant string) (deletion.CountReport, error)
	StartDeletion(ctx context.Context, tenant string) (*deletion.Job, bool, error)
	Latest(ctx context.Context, tenant string) (*deletion.Job, error)
}

// CountsBody is GET /api/v1/tenants/{tenant}/counts.
type CountsBody struct {
	TenantID string             `json:"tenant_id"`
	Counts   map[string]int64   `json:"counts"`
	Total    int64              `json:"total"`
	Failed   []deletion.Failure `json:"failed"`
}

// TenantRoutes serves the tenant erasure routes.
func TenantRoutes(svc Tenants) func(*http.ServeMux) {
	return func(mux *http.ServeMux) {
		mux.HandleFunc("GET /api/v1/tenants/{tenant}/counts", func(w http.ResponseWriter, r *http.Request) {
			tenant := r.PathValue("tenant")
			rep, err := svc.Counts(r.Context(), tenant)
			if err != nil {
				writeError(w, r, ScopeTenant, err)
				return
			}
			writeJSON(w, http.StatusOK, CountsBody{TenantID: tenant, Counts: rep.Counts, Total: rep.Total(), Failed: rep.Failed})
		})
		mux.HandleFunc("POST /api/v1/tenants/{tenant}/deletion", func(w http.ResponseWriter, r *http.Request) {
			tenant := r.PathValue("tenant")
			job, created, err := svc.StartDeletion(r.Context(), tenant)
			if err != nil {
				writeError(w, r, ScopeTenant, err)
				return
			}
			w.Header().Set("Location", "/api/v1/tenants/"+escapePath(tenant)+"/deletion")
			if !created {
				w.Header().Set("X-Existing-Job", "true")
			}
			writeJSON(w, http.StatusAccepted, job.ToJSON())
		})
		mux.HandleFunc("GET /api/v1/tenants/{tenant}/deletion", func(w http.ResponseWriter, r *http.Request) {
			job, err := svc.Latest(r.Context(), r.PathValue("tenant"))
			if err != nil {
				writeError(w, r, ScopeTenant, err)
				return
			}
			writeJSON(w, http.StatusOK, job.ToJSON())
		})
	}
}
