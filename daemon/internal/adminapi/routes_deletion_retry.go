package adminapi

import "net/http"

// retryRoute serves POST /api/v1/tenants/{tenant}/deletion/retry: the
// operator's way to run a BLOCKED job again once the cause is fixed (a
// deleter configured again, its config corrected), or a PARTIAL one now
// instead of after its backoff.
func retryRoute(g routeGroup, svc Tenants) {
	g.handle("POST /api/v1/tenants/{tenant}/deletion/retry", func(r *http.Request) (any, error) {
		if err := strictRequest(r, bodyAllowed); err != nil {
			return nil, err
		}
		var empty struct{}
		if _, err := decodeBody(r, &empty, "empty"); err != nil {
			return nil, err
		}
		job, err := svc.Retry(r.Context(), r.PathValue("tenant"))
		if err != nil {
			return nil, err
		}
		if l := loggerFrom(r); l != nil {
			l.Info("deletion job retry", "tenant_id", job.TenantID, "job_id", job.ID.String(), "status", job.Status,
				"uid", uidField(callerUID(r)), "request_id", requestID(r))
		}
		return accepted(JobBody(job), "Location", "/api/v1/tenants/"+escapePath(job.TenantID)+"/deletion"), nil
	})
}
