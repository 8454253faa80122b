package adminapi

import (
	"encoding/json"
	"math"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/bulk"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

// operationJSON renders op; now dates the ETA.
func operationJSON(op *dlq.Operation, now time.Time) wire.Operation {
	out := wire.Operation{ID: op.ID.String(), Action: string(op.Action), State: string(op.State), Filter: json.RawMessage(op.Filter),
		TargetTopic: op.TargetTopic, Rate: op.Rate, Matched: op.Matched, Done: op.Done, Succeeded: op.Succeeded, Failed: op.Failed,
		Outcomes: op.Outcomes, CreatedAt: formatTime(op.CreatedAt), StartedAt: formatTimePtr(op.StartedAt),
		FinishedAt: formatTimePtr(op.FinishedAt), RequestedByUID: op.RequestedByUID, CancelRequestedAt: formatTimePtr(op.CancelRequestedAt),
		CancelledByUID: op.CancelledByUID, LastError: op.LastError, InFlightAtMost: bulk.InFlightAtMost(op)}
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
