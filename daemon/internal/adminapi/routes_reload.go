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
		mux.HandleFunc("POST /api/v1/reload", func(w http.ResponseWriter, r *http.Request) {
			if err := strictRequest(r, noBody); err != nil {
				writeError(w, r, ScopeNone, err)
				return
			}
			err := reload(r.Context())
			switch {
			case err == nil:
				writeJSON(w, http.StatusOK, wire.ReloadResult{Reloaded: true, Message: "config reloaded"})
			case errors.Is(err, derrors.ErrConflict):
				writeError(w, r, ScopeNone, &apiError{status: http.StatusConflict, code: "SYS_RELOAD_REFUSED", message: err.Error()})
			default:
				writeError(w, r, ScopeNone, err)
			}
		})
	}
}
