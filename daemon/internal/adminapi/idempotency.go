package adminapi

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lifecycled/lifecycled/daemon/internal/idempotency"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

// IdempotencyOptions configure Idempotency-Key handling (package
// idempotency holds the rules and the middleware; this wires it to the
// API's envelope and peer credentials).
type IdempotencyOptions struct {
	Store idempotency.Store
	// Settings are read per request, so a reload applies at once.
	TTL            func() time.Duration
	MismatchStatus func() int // 409 (source design) or 422 (IETF draft)
	LockTimeout    func() time.Duration
	// CanonicalURI, when set, returns the request target the fingerprint
	// covers, so that two spellings of one request are one request (see
	// CanonicalTenantURI); by default the request URI as sent.
	CanonicalURI func(r *http.Request) string
}

func newIdempotencyMiddleware(o IdempotencyOptions, reg prometheus.Registerer) *idempotency.Middleware {
	return idempotency.NewMiddleware(idempotency.Options{
		Store: o.Store, TTL: o.TTL, MismatchStatus: o.MismatchStatus, LockTimeout: o.LockTimeout, CanonicalURI: o.CanonicalURI,
		CallerUID:  func(r *http.Request) uint32 { return Peer(r.Context()).UID },
		Fail:       idempotencyFailure,
		Registerer: reg,
	})
}

// idempotencyFailure answers the middleware's failures in the envelope.
func idempotencyFailure(w http.ResponseWriter, r *http.Request, f idempotency.Failure) {
	if f.LogOnly {
		if l := loggerFrom(r); l != nil {
			l.Error("store idempotent response", "error", f.Err)
		}
		return
	}
	if f.Err != nil {
		writeError(w, r, scopeOf(r.URL.Path), f.Err)
		return
	}
	ae := &apiError{status: f.Status, code: f.Code, kind: "VALIDATION_ERROR", message: f.Message}
	if f.Field != "" {
		ae.details = []any{wire.FieldProblem{Field: f.Field, Problem: f.Message}}
	}
	scope := ScopeNone
	if f.Code == "" {
		scope = scopeOf(r.URL.Path)
	}
	writeError(w, r, scope, ae)
}
