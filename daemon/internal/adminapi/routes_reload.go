package adminapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

// ReloadRoutes serves POST /api/v1/reload: the same reload as SIGHUP, but
// the caller learns whether it was applied. A refused reload (invalid file,
// a plugin that did not start with its new config) answers 409
// SYS_RELOAD_REFUSED and the running config stays.
func ReloadRoutes(reload func(context.Context) error) func(*http.ServeMux) {
	return func(mux *http.ServeMux) {
		g := routeGroup{mux: mux, scope: ScopeNone}
		g.handle("POST /api/v1/reload", func(r *http.Request) (any, error) {
			if err := strictRequest(r, noBody); err != nil {
				return nil, err
			}
			err := reload(r.Context())
			switch {
			case err == nil:
				return wire.ReloadResult{Reloaded: true, Message: "config reloaded"}, nil
			case errors.Is(err, derrors.ErrConflict):
				return nil, &apiError{status: http.StatusConflict, code: "SYS_RELOAD_REFUSED", message: err.Error()}
			default:
				return nil, err
			}
		})
	}
}
