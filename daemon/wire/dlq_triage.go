package wire

import "encoding/json"

// History is GET /api/v1/dlq/messages/{id}/history.
type History struct {
	Events []Event `json:"events"`
}

// Event is one history event. Detail is an object whose fields depend
// on kind (docs/reference.md, History); uid is the operator's, null for the daemon.
type Event struct {
	At     string          `json:"at"`
	Kind   string          `json:"kind"`
	Detail json.RawMessage `json:"detail"`
	UID    *uint32         `json:"uid"`
}

// ReplayResult is POST /api/v1/dlq/messages/{id}/replay: the stored message,
// unchanged, and what was (or, on a dry run, would be) sent.
type ReplayResult struct {
	Original Message  `json:"original"`
	Replayed Replayed `json:"replayed"`
	// Changed names what the replay changes from the stored message:
	// "payload", "key", "headers", "topic" (the diff preview).
	Changed []string `json:"changed"`
	DryRun  bool     `json:"dry_run"`
}

// Replayed is the message a replay sends: payload as JSON when it
// parses as JSON, else payload_base64; key and headers as in Message.
type Replayed struct {
	ID            string          `json:"id"`
	Topic         string          `json:"topic"`
	Key           *string         `json:"key"`
	KeyBase64     Base64Field     `json:"key_base64,omitzero"`
	Headers       []Header        `json:"headers"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	PayloadBase64 Base64Field     `json:"payload_base64,omitzero"`
}

// Pause is a topic's pause, in GET /api/v1/dlq and the pause routes.
type Pause struct {
	PausedAt string  `json:"paused_at"`
	Reason   string  `json:"reason"`
	Auto     bool    `json:"auto"`
	UID      *uint32 `json:"uid"`
}

// PauseResult answers POST /api/v1/dlq/{topic}/pause and .../resume.
type PauseResult struct {
	Topic  string `json:"topic"`
	Paused bool   `json:"paused"`
	Pause  *Pause `json:"pause,omitempty"`
	// Created is false when the topic was paused already (the pause in
	// force is shown, unchanged).
	Created bool   `json:"created,omitempty"`
	Message string `json:"message"`
}
