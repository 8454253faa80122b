package adminapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

// Plans is what the plan and approval routes need.
type Plans interface {
	Plan(ctx context.Context, tenant string) (*deletion.Plan, error)
	Approve(ctx context.Context, tenant string, o deletion.ApproveOptions) (*deletion.Job, error)
}

// PlanRoutes serve deletion plans and approvals.
func PlanRoutes(svc Plans) func(*http.ServeMux) {
	return func(mux *http.ServeMux) {
		g := routeGroup{mux: mux, scope: ScopeTenant}
		g.handle("GET /api/v1/tenants/{tenant}/plan", func(r *http.Request) (any, error) {
			if err := onlyParams(r.URL.Query()); err != nil {
				return nil, err
			}
			p, err := svc.Plan(r.Context(), r.PathValue("tenant"))
			if err != nil {
				return nil, err
			}
			return planBody(p), nil
		})
		g.handle("POST /api/v1/tenants/{tenant}/deletion/approve", func(r *http.Request) (any, error) {
			var body wire.ApproveRequest
			if err := decodeRequired(r, &body, `{"plan_hash": "sha256:<the plan hash the approver read>"}`, "plan_hash", func() bool { return body.PlanHash != nil }); err != nil {
				return nil, err
			}
			uid := callerUID(r)
			job, err := svc.Approve(r.Context(), r.PathValue("tenant"), deletion.ApproveOptions{PlanHash: *body.PlanHash, UID: uid})
			l := loggerFrom(r)
			if err != nil {
				// Refusals are audited too: a stale plan or the two-person
				// rule saying no is what an auditor asks about.
				if l != nil && !errors.Is(err, deletion.ErrPlanIncomplete) && classify(err, ScopeTenant).status < 500 {
					l.Warn("deletion approval refused", "tenant", r.PathValue("tenant"), "plan_hash", *body.PlanHash,
						"uid", uidField(uid), "reason", err.Error(), "request_id", requestID(r))
				}
				return nil, err
			}
			if l != nil {
				l.Info("deletion job approved", "tenant_id", job.TenantID, "job_id", job.ID.String(), "plan_hash", job.PlanHash,
					"uid", uidField(uid), "requested_by_uid", uidField(job.RequestedByUID), "status", job.Status, "request_id", requestID(r))
			}
			return JobBody(job), nil
		})
	}
}
