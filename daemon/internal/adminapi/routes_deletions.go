package adminapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

// DeletionRoutes serve the job list and the bulk request.
func DeletionRoutes(svc Tenants) func(*http.ServeMux) {
	return func(mux *http.ServeMux) {
		g := routeGroup{mux: mux, scope: ScopeTenant}
		g.handle("GET /api/v1/deletions", func(r *http.Request) (any, error) {
			f, err := parseJobQuery(r.URL.Query(), true)
			if err != nil {
				return nil, err
			}
			page, err := svc.Jobs(r.Context(), f)
			if err != nil {
				return nil, err
			}
			return jobsBody(page), nil
		})
		g.handle("POST /api/v1/deletions", func(r *http.Request) (any, error) {
			var body wire.BulkRequest
			if err := decodeRequired(r, &body, `{"tenant_ids": ["<id>", ...], "not_before": "<RFC 3339 time, optional>", "plan_hash": "<optional>"}`, "tenant_ids", func() bool { return body.TenantIDs != nil }); err != nil {
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
			res, err := svc.StartDeletions(r.Context(), body.TenantIDs, deletion.StartOptions{NotBefore: notBefore, UID: callerUID(r), PlanHash: planHash})
			var inv *deletion.InvalidTenantsError
			if errors.As(err, &inv) {
				return nil, invalidTenants(inv)
			}
			if err != nil {
				return nil, err
			}
			return accepted(bulkAnswer(r, res)), nil
		})
	}
}

// invalidTenants is the 400 of a bulk request with invalid ids: one
// detail per id, with its index, so that a client can name its line.
func invalidTenants(e *deletion.InvalidTenantsError) *apiError {
	ae := invalid("%s", e.Error())
	for _, p := range e.Problems {
		ae.details = append(ae.details, wire.FieldProblem{Field: fmt.Sprintf("tenant_ids[%d]", p.Index), Problem: p.Err.Error()})
	}
	return ae
}

func bulkAnswer(r *http.Request, res []deletion.JobCreated) wire.BulkResult {
	out := wire.BulkResult{Results: make([]wire.BulkItem, 0, len(res))}
	for i, c := range res {
		br := wire.BulkItem{Index: i}
		switch {
		case c.Hold != nil:
			out.OnHold++
			err := &deletion.OnHoldError{Hold: c.Hold}
			ae := classify(err, ScopeTenant)
			br.TenantID = c.Hold.TenantID
			br.Error = &wire.ErrorDetail{Code: ae.fullCode(ScopeTenant), Message: ae.message, RequestID: requestID(r), Details: []any{}}
		default:
			j := JobBody(c.Job)
			br.TenantID, br.JobID, br.Status, br.Created, br.NotBefore = j.TenantID, j.ID, j.Status, c.Created, j.NotBefore
			if c.Created {
				out.Queued++
			} else {
				out.Existing++
			}
		}
		out.Results = append(out.Results, br)
	}
	return out
}
