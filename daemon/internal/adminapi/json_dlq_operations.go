package adminapi

import (
	"encoding/json"
	"math"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// OperationJSON is a bulk operation (POST and GET /api/v1/dlq/operations).
type OperationJSON struct {
	ID     string `json:"id"`
	Action string `json:"action"`
	// State is RUNNING (also while waiting for a daemon to take it after a
	// restart), COMPLETED, CANCELLED or FAILED.
	State string `json:"state"`
	// Filter is the filter (or {"ids": [...]}) as the request gave it.
	Filter      json.RawMessage `json:"filter"`
	TargetTopic string          `json:"target_topic,omitempty"`
	Rate        float64         `json:"rate"`
	Matched     int64           `json:"matched"`
	Done        int64           `json:"done"`
	Succeeded   int64           `json:"succeeded"`
	Failed      int64           `json:"failed"`
	// Outcomes counts done by what became of each message (retried,
	// revived, deleted, marked_dead, replayed, not_recorded, refused,
	// unavailable, skipped, failed).
	Outcomes map[string]int64 `json:"outcomes"`
	// ETASeconds is the time left at the pace so far (or the rate); null
	// when it cannot be told yet or the operation is over.
	ETASeconds        *float64 `json:"eta_seconds"`
	CreatedAt         string   `json:"created_at"`
	StartedAt         *string  `json:"started_at"`
	FinishedAt        *string  `json:"finished_at"`
	RequestedByUID    *uint32  `json:"requested_by_uid"`
	CancelRequestedAt *string  `json:"cancel_requested_at"`
	CancelledByUID    *uint32  `json:"cancelled_by_uid"`
	// Daemon is the daemon that holds the operation now; "" when none.
	Daemon    string `json:"daemon"`
	LastError string `json:"last_error,omitempty"`
	// Failures are the first items that did not succeed, with why (on GET
	// of one operation only).
	Failures []OperationFailureJSON `json:"failures,omitempty"`
}

// OperationFailureJSON is one item of an operation that did not succeed.
type OperationFailureJSON struct {
	ID      string `json:"id"`
	Outcome string `json:"outcome"`
	Error   string `json:"error"`
}

// OperationsBody is GET /api/v1/dlq/operations.
type OperationsBody struct {
	Operations []OperationJSON `json:"operations"`
}

// OperationDryRunBody is POST /api/v1/dlq/operations with dry_run.
type OperationDryRunBody struct {
	DryRun  bool          `json:"dry_run"`
	Matched int64         `json:"matched"`
	Sample  []MessageJSON `json:"sample"`
}

// operationJSON renders op; now dates the ETA.
func operationJSON(op *dlq.Operation, now time.Time) OperationJSON {
	out := OperationJSON{ID: op.ID.String(), Action: string(op.Action), State: string(op.State), Filter: json.RawMessage(op.Filter),
		TargetTopic: op.TargetTopic, Rate: op.Rate, Matched: op.Matched, Done: op.Done, Succeeded: op.Succeeded, Failed: op.Failed,
		Outcomes: op.Outcomes, CreatedAt: formatTime(op.CreatedAt), StartedAt: formatTimePtr(op.StartedAt),
		FinishedAt: formatTimePtr(op.FinishedAt), RequestedByUID: op.RequestedByUID, CancelRequestedAt: formatTimePtr(op.CancelRequestedAt),
		CancelledByUID: op.CancelledByUID, LastError: op.LastError}
	if len(out.Filter) == 0 {
		out.Filter = json.RawMessage("{}")
	}
	if op.LeaseExpiresAt != nil && op.LeaseExpiresAt.After(now) {
		out.Daemon = op.LeaseOwner
	}
	out.ETASeconds = operationETA(op, now)
	return out
}

// operationETA is the time left: at the pace since the start once some
// are done, and never sooner than the rate allows.
func operationETA(op *dlq.Operation, now time.Time) *float64 {
	if op.Finished() {
		return nil
	}
	left := float64(op.Matched - op.Done)
	var eta float64
	switch {
	case op.Done > 0 && op.StartedAt != nil:
		eta = now.Sub(*op.StartedAt).Seconds() / float64(op.Done) * left
	case op.Rate <= 0:
		return nil
	}
	if op.Rate > 0 {
		eta = max(eta, left/op.Rate)
	}
	if math.IsInf(eta, 0) || math.IsNaN(eta) {
		// Not an estimate (a rate stored before rates were bounded):
		// JSON cannot carry it, and the operation must still be listed.
		return nil
	}
	return &eta
}
