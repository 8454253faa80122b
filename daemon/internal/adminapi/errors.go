package adminapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/lifecycled/lifecycled/daemon/wire"
)

// Scope selects the SYS_<SCOPE>_ prefix of error codes for a route family.
type Scope string

// Scopes.
const (
	ScopeNone   Scope = ""
	ScopeDLQ    Scope = "DLQ"
	ScopeTenant Scope = "TENANT"
)

// scopeOf picks the scope from the path, for errors raised before a route
// matched (unknown routes, bad paths, body limits).
func scopeOf(path string) Scope {
	switch {
	case strings.HasPrefix(path, "/api/v1/dlq"):
		return ScopeDLQ
	case strings.HasPrefix(path, "/api/v1/tenants"), strings.HasPrefix(path, "/api/v1/deletions"),
		strings.HasPrefix(path, "/api/v1/holds"), strings.HasPrefix(path, "/api/v1/receipts"),
		strings.HasPrefix(path, "/api/v1/erasures"):
		return ScopeTenant
	default:
		return ScopeNone
	}
}

// apiError is an error that already knows its HTTP status and code.
type apiError struct {
	status  int
	kind    string // NOT_FOUND, VALIDATION_ERROR, ...
	code    string // full code when it is not SYS_<scope>_<kind>
	message string
	details []any
}

func (e *apiError) Error() string { return e.message }

func invalid(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, kind: "VALIDATION_ERROR", message: fmt.Sprintf(format, args...)}
}

func invalidField(field, format string, args ...any) *apiError {
	msg := fmt.Sprintf(format, args...)
	return &apiError{status: http.StatusBadRequest, kind: "VALIDATION_ERROR", message: fmt.Sprintf("invalid %s: %s", field, msg),
		details: []any{wire.FieldProblem{Field: field, Problem: msg}}}
}

func notFound(format string, args ...any) *apiError {
	return &apiError{status: http.StatusNotFound, kind: "NOT_FOUND", message: fmt.Sprintf(format, args...)}
}

// classify turns err into the answer the errorTable gives its meaning; an
// error that already knows its answer (apiError) keeps it.
func classify(err error, scope Scope) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	for _, row := range errorTable {
		if !errors.Is(err, row.err) {
			continue
		}
		msg := row.message
		if msg == "" {
			msg = err.Error()
		}
		kind := row.kind
		if k, ok := row.scoped[scope]; ok {
			kind = k
		}
		return &apiError{status: row.status, kind: kind, code: row.code, message: msg}
	}
	// The cause goes to the log (writeError), never to the caller: driver
	// texts name users, databases and hosts.
	return &apiError{status: http.StatusInternalServerError, kind: "INTERNAL_ERROR",
		message: "internal error; the daemon's log has the details under this request id"}
}

func (e *apiError) fullCode(scope Scope) string {
	if e.code != "" {
		return e.code
	}
	if scope == ScopeNone {
		return "SYS_" + e.kind
	}
	return "SYS_" + string(scope) + "_" + e.kind
}

// writeError answers err in the envelope.
func writeError(w http.ResponseWriter, r *http.Request, scope Scope, err error) {
	ae := classify(err, scope)
	details := ae.details
	if details == nil {
		details = []any{}
	}
	if ae.status >= 500 {
		if l := loggerFrom(r); l != nil {
			l.Error("request failed", "method", r.Method, "path", r.URL.Path, "request_id", requestID(r), "error", err)
		}
	}
	writeJSON(w, ae.status, wire.ErrorBody{Error: wire.ErrorDetail{
		Code:      ae.fullCode(scope),
		Message:   ae.message,
		RequestID: requestID(r),
		Details:   details,
	}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"SYS_INTERNAL_ERROR","message":"cannot encode response","request_id":"","details":[]}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func escapePath(s string) string { return url.PathEscape(s) }
