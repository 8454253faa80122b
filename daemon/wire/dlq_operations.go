package wire

import (
	"encoding/json"
	"net/url"
)

// OperationRequest is the body of POST /api/v1/dlq/operations.
type OperationRequest struct {
	Action      string          `json:"action,omitempty"`
	Filter      json.RawMessage `json:"filter,omitempty"`
	IDs         []string        `json:"ids,omitempty"`
	Rate        *float64        `json:"rate,omitempty"`
	DryRun      bool            `json:"dry_run,omitempty"`
	TargetTopic *string         `json:"target_topic,omitempty"`
}

// OperationFilter is the filter of a bulk operation: the search
// filters of GET /api/v1/dlq/messages as JSON fields, status and header as
// lists.
type OperationFilter struct {
	Topic      *string  `json:"topic,omitempty"`
	Status     []string `json:"status,omitempty"`
	Error      *string  `json:"error,omitempty"`
	Group      *string  `json:"group,omitempty"`
	ErrorGroup *string  `json:"error_group,omitempty"`
	Key        *string  `json:"key,omitempty"`
	Header     []string `json:"header,omitempty"`
	Q          *string  `json:"q,omitempty"`
	Since      *string  `json:"since,omitempty"`
	Until      *string  `json:"until,omitempty"`
}

// values is the filter as the search's query parameters, so it is checked
// by the very code that checks a search.
func (f OperationFilter) Values() url.Values {
	v := url.Values{}
	set := func(name string, s *string) {
		if s != nil {
			v.Set(name, *s)
		}
	}
	set("topic", f.Topic)
	set("error", f.Error)
	set("group", f.Group)
	set("error_group", f.ErrorGroup)
	set("key", f.Key)
	set("q", f.Q)
	set("since", f.Since)
	set("until", f.Until)
	for _, s := range f.Status {
		v.Add("status", s)
	}
	for _, h := range f.Header {
		v.Add("header", h)
	}
	return v
}

// Operation is a bulk operation (POST and GET /api/v1/dlq/operations).
type Operation struct {
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
	// InFlightAtMost is how many messages a run may have under way at once
	// (sent, their outcomes not yet recorded): a cancel waits for those.
	InFlightAtMost int `json:"in_flight_at_most"`
	// Daemon is the daemon that holds the operation now; "" when none.
	Daemon    string `json:"daemon"`
	LastError string `json:"last_error,omitempty"`
	// Failures are the first items that did not succeed, with why (on GET
	// of one operation only).
	Failures []OperationFailure `json:"failures,omitempty"`
}

// OperationFailure is one item of an operation that did not succeed.
type OperationFailure struct {
	ID      string `json:"id"`
	Outcome string `json:"outcome"`
	Error   string `json:"error"`
}

// Operations is GET /api/v1/dlq/operations.
type Operations struct {
	Operations []Operation `json:"operations"`
}

// OperationDryRun is POST /api/v1/dlq/operations with dry_run.
type OperationDryRun struct {
	DryRun  bool      `json:"dry_run"`
	Matched int64     `json:"matched"`
	Sample  []Message `json:"sample"`
}
