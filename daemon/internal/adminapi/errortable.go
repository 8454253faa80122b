package adminapi

import (
	"net/http"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/ledger"
)

// errorRow is one meaning and the answer it gets: an HTTP status, and a
// code that is either SYS_<scope>_<kind> (the route family's scope, or
// SYS_<kind> outside one) or a fixed code.
type errorRow struct {
	err    error // matched with errors.Is
	status int
	kind   string
	// scoped overrides kind in one scope.
	scoped map[Scope]string
	// only lists the scopes it can happen in; nil for every one.
	only []Scope
	code string // a fixed code instead of a scoped one
	// message replaces the error's own text (hiding driver text).
	message string
}

// errorTable is the one place where meaning becomes an HTTP status and a
// code, first match wins: derrors sentinels, and the dead-letter errors
// that wrap them or mean something of their own. docs/reference.md lists
// every code; TestEveryCodeIsDocumented keeps the two in step.
var errorTable = []errorRow{
	{err: derrors.ErrStoreUnavailable, status: http.StatusServiceUnavailable, code: "SYS_STATE_STORE_UNAVAILABLE",
		message: "the state store is unavailable; try again later (the daemon's log has the cause under this request id)"},
	// The broker refused the message: an upstream failure, not ours.
	{err: dlq.ErrRepublishFailed, status: http.StatusBadGateway, kind: "REPUBLISH_FAILED", only: []Scope{ScopeDLQ}},
	{err: derrors.ErrNotFound, status: http.StatusNotFound, kind: "NOT_FOUND"},
	// Before ErrInvalid, which both also are: a ledger file that does not
	// verify changes nothing.
	{err: ledger.ErrKeyUnknown, status: http.StatusBadRequest, code: "SYS_LEDGER_KEY_UNKNOWN", only: []Scope{ScopeTenant}},
	{err: ledger.ErrInvalidFile, status: http.StatusBadRequest, code: "SYS_LEDGER_INVALID", only: []Scope{ScopeTenant}},
	{err: derrors.ErrInvalid, status: http.StatusBadRequest, kind: "VALIDATION_ERROR"},
	// Before ErrConflict, which an OnHoldError also is.
	{err: deletion.ErrOnHold, status: http.StatusConflict, code: "SYS_TENANT_ON_HOLD", only: []Scope{ScopeTenant}},
	// The plan an operator named is not the plan now, or has no hash.
	{err: deletion.ErrPlanChanged, status: http.StatusConflict, code: "SYS_TENANT_PLAN_CHANGED", only: []Scope{ScopeTenant}},
	{err: deletion.ErrPlanIncomplete, status: http.StatusConflict, code: "SYS_TENANT_PLAN_INCOMPLETE", only: []Scope{ScopeTenant}},
	{err: deletion.ErrApproverNotDistinct, status: http.StatusForbidden, code: "SYS_TENANT_APPROVER_NOT_DISTINCT", only: []Scope{ScopeTenant}},
	{err: derrors.ErrConflict, status: http.StatusConflict, kind: "CONFLICT"},
	{err: derrors.ErrUnavailable, status: http.StatusServiceUnavailable, kind: "UNAVAILABLE",
		scoped: map[Scope]string{ScopeDLQ: "SOURCE_UNAVAILABLE"}},
}

// answerKinds are the kinds the API answers without the table: before a
// route (403, 405, 404, 413) or for errors it raises itself.
var answerKinds = []string{"VALIDATION_ERROR", "NOT_FOUND", "FORBIDDEN", "METHOD_NOT_ALLOWED", "INTERNAL_ERROR"}

// fixedCodes are codes without a scope.
var fixedCodes = []string{
	"SYS_STATE_STORE_UNAVAILABLE", "SYS_RELOAD_REFUSED", "SYS_TENANT_ON_HOLD",
	"SYS_TENANT_PLAN_CHANGED", "SYS_TENANT_PLAN_INCOMPLETE", "SYS_TENANT_APPROVER_NOT_DISTINCT",
	"SYS_LEDGER_INVALID", "SYS_LEDGER_KEY_UNKNOWN",
	"SYS_IDEMPOTENCY_KEY_MISMATCH", "SYS_IDEMPOTENCY_IN_FLIGHT", "SYS_IDEMPOTENCY_VALIDATION_ERROR",
}

// Codes lists every code the admin API can answer.
func Codes() []string {
	seen := map[string]bool{}
	var out []string
	add := func(c string) {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	all := []Scope{ScopeNone, ScopeDLQ, ScopeTenant}
	rows := append([]errorRow(nil), errorTable...)
	for _, k := range answerKinds {
		rows = append(rows, errorRow{kind: k})
	}
	for _, row := range rows {
		if row.code != "" {
			add(row.code)
			continue
		}
		scopes := row.only
		if scopes == nil {
			scopes = all
		}
		for _, scope := range scopes {
			k := row.kind
			if over, ok := row.scoped[scope]; ok {
				k = over
			}
			add((&apiError{kind: k}).fullCode(scope))
		}
	}
	for _, c := range fixedCodes {
		add(c)
	}
	return out
}
