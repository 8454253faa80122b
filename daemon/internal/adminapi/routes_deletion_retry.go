package adminapi

import "net/http"

// retryRoute serves POST /api/v1/tenants/{tenant}/deletion/retry: the
// operator's way to run a BLOCKED job again once the cause is fixed (a
// deleter configured again, its config corrected), or a PARTIAL one now
// instead of after its backoff.
func retryRoute(mux *http.ServeMux, svc Tenants) {
	mux.HandleFunc("POST /api/v1/tenants/{tenant}/deletion/retry", func(w http.ResponseWriter, r *http.Request) {
		if err := strictRequest(r, bodyAllowed); err != nil {
			writeError(w, r, ScopeTenant, err)
			return
		}
		var empty struct{}
		if _, err := decodeBody(r, &empty, "empty"); err != nil {
			writeError(w, r, ScopeTenant, err)
			return
		}
		job, err := svc.Retry(r.Context(), r.PathValue("tenant"))
		if err != nil {
			writeError(w, r, ScopeTenant, err)
			return
		}
		if l := loggerFrom(r); l != nil {
			l.Info("deletion job retry", "tenant_id", job.TenantID, "job_id", job.ID.String(), "status", job.Status,
				"uid", uidField(callerUID(r)), "request_id", requestID(r))
		}
		w.Header().Set("Location", "/api/v1/tenants/"+escapePath(job.TenantID)+"/deletion")
		writeJSON(w, http.StatusAccepted, JobBody(job))
	})
}
