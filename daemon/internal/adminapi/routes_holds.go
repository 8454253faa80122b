package adminapi

import (
	"context"
	"net/http"
	"strconv"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

// Holds is what the legal hold routes need.
type Holds interface {
	Hold(ctx context.Context, tenant, reason string, uid *int64) (*deletion.Hold, bool, error)
	Release(ctx context.Context, tenant string, uid *int64) (*deletion.Hold, error)
	HoldOf(ctx context.Context, tenant string) (*deletion.Hold, error)
	Holds(ctx context.Context, f deletion.HoldFilter) (deletion.HoldPage, error)
}

// HoldRoutes serve legal holds.
func HoldRoutes(svc Holds) func(*http.ServeMux) {
	return func(mux *http.ServeMux) {
		g := routeGroup{mux: mux, scope: ScopeTenant}
		g.handle("PUT /api/v1/tenants/{tenant}/hold", func(r *http.Request) (any, error) {
			var body wire.HoldRequest
			if err := decodeRequired(r, &body, `{"reason": "<why the tenant's data must stay>"}`, "reason", func() bool { return body.Reason != nil }); err != nil {
				return nil, err
			}
			hold, created, err := svc.Hold(r.Context(), r.PathValue("tenant"), *body.Reason, callerUID(r))
			if err != nil {
				return nil, err
			}
			if l := loggerFrom(r); l != nil && created {
				l.Info("tenant placed on legal hold", "tenant_id", hold.TenantID, "reason", hold.Reason,
					"uid", uidField(hold.HeldByUID), "request_id", requestID(r))
			}
			return HoldBody(hold), nil
		})
		g.handle("DELETE /api/v1/tenants/{tenant}/hold", func(r *http.Request) (any, error) {
			if err := strictRequest(r, noBody); err != nil {
				return nil, err
			}
			hold, err := svc.Release(r.Context(), r.PathValue("tenant"), callerUID(r))
			if err != nil {
				return nil, err
			}
			if l := loggerFrom(r); l != nil {
				l.Info("legal hold released", "tenant_id", hold.TenantID, "reason", hold.Reason,
					"uid", uidField(hold.ReleasedByUID), "request_id", requestID(r))
			}
			return HoldBody(hold), nil
		})
		g.handle("GET /api/v1/tenants/{tenant}/hold", func(r *http.Request) (any, error) {
			hold, err := svc.HoldOf(r.Context(), r.PathValue("tenant"))
			if err != nil {
				return nil, err
			}
			return HoldBody(hold), nil
		})
		g.handle("GET /api/v1/holds", func(r *http.Request) (any, error) {
			f, err := parseHoldQuery(r)
			if err != nil {
				return nil, err
			}
			page, err := svc.Holds(r.Context(), f)
			if err != nil {
				return nil, err
			}
			out := wire.Holds{Holds: make([]wire.Hold, 0, len(page.Holds))}
			for _, h := range page.Holds {
				out.Holds = append(out.Holds, HoldBody(h))
			}
			if page.Next != nil {
				s := page.Next.String()
				out.NextCursor = &s
			}
			return out, nil
		})
	}
}

func parseHoldQuery(r *http.Request) (deletion.HoldFilter, error) {
	q := r.URL.Query()
	var f deletion.HoldFilter
	if err := onlyParams(q, "include_released", "tenant", "limit", "cursor"); err != nil {
		return f, err
	}
	var err error
	if f.Limit, f.After, err = parsePage(q); err != nil {
		return f, err
	}
	if v, ok, err := single(q, "include_released"); err != nil {
		return f, err
	} else if ok {
		if f.IncludeReleased, err = strconv.ParseBool(v); err != nil {
			return f, invalidField("include_released", "%q is not true or false", truncate(v))
		}
	}
	if v, ok, err := single(q, "tenant"); err != nil {
		return f, err
	} else if ok {
		f.Tenant = v
	}
	return f, nil
}
