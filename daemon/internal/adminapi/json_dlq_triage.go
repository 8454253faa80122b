package adminapi

import (
	"encoding/json"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// HistoryBody is GET /api/v1/dlq/messages/{id}/history.
type HistoryBody struct {
	Events []EventJSON `json:"events"`
}

// EventJSON is one history event. Detail is an object whose fields depend
// on kind (docs/operations.md); uid is the operator's, null for the daemon.
type EventJSON struct {
	At     string          `json:"at"`
	Kind   string          `json:"kind"`
	Detail json.RawMessage `json:"detail"`
	UID    *uint32         `json:"uid"`
}

func historyJSON(events []dlq.HistoryEvent) HistoryBody {
	out := HistoryBody{Events: make([]EventJSON, len(events))}
	for i, e := range events {
		d := json.RawMessage(e.Detail)
		if !json.Valid(d) {
			d = json.RawMessage("{}")
		}
		out.Events[i] = EventJSON{At: formatTime(e.At), Kind: e.Kind, Detail: d, UID: e.UID}
	}
	return out
}

// ReplayBody is POST /api/v1/dlq/messages/{id}/replay: the stored message,
// unchanged, and what was (or, on a dry run, would be) sent.
type ReplayBody struct {
	Original MessageJSON  `json:"original"`
	Replayed ReplayedJSON `json:"replayed"`
	// Changed names what the replay changes from the stored message:
	// "payload", "key", "headers", "topic" (the diff preview).
	Changed []string `json:"changed"`
	DryRun  bool     `json:"dry_run"`
}

// ReplayedJSON is the message a replay sends: payload as JSON when it
// parses as JSON, else payload_base64; key and headers as in MessageJSON.
type ReplayedJSON struct {
	ID            string          `json:"id"`
	Topic         string          `json:"topic"`
	Key           *string         `json:"key"`
	KeyBase64     Base64Field     `json:"key_base64,omitzero"`
	Headers       []HeaderJSON    `json:"headers"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	PayloadBase64 Base64Field     `json:"payload_base64,omitzero"`
}

func replayJSON(r *dlq.Replay, sourceConfigured bool) ReplayBody {
	out := ReplayBody{Original: messageJSON(r.Original, sourceConfigured), DryRun: r.DryRun, Changed: replayChanges(r)}
	rj := ReplayedJSON{ID: r.ID.String(), Topic: r.Topic, Headers: make([]HeaderJSON, 0, len(r.Headers))}
	rj.Key, rj.KeyBase64 = textOrBase64(r.Key)
	for _, h := range r.Headers {
		var hj HeaderJSON
		hj.Key, hj.KeyBase64 = textOrBase64(h.Key)
		hj.Value, hj.ValueBase64 = textOrBase64(h.Value)
		rj.Headers = append(rj.Headers, hj)
	}
	if len(r.Payload) > 0 && json.Valid(r.Payload) {
		rj.Payload = json.RawMessage(r.Payload)
	} else {
		rj.PayloadBase64 = base64Of(r.Payload)
	}
	out.Replayed = rj
	return out
}

func replayChanges(r *dlq.Replay) []string {
	return append([]string{}, dlq.ReplayChanges(r)...)
}

// PauseJSON is a topic's pause, in GET /api/v1/dlq and the pause routes.
type PauseJSON struct {
	PausedAt string  `json:"paused_at"`
	Reason   string  `json:"reason"`
	Auto     bool    `json:"auto"`
	UID      *uint32 `json:"uid"`
}

func pauseJSON(p *dlq.TopicPause) *PauseJSON {
	if p == nil {
		return nil
	}
	return &PauseJSON{PausedAt: formatTime(p.PausedAt), Reason: p.Reason, Auto: p.Auto, UID: p.UID}
}

// PauseBody answers POST /api/v1/dlq/{topic}/pause and .../resume.
type PauseBody struct {
	Topic  string     `json:"topic"`
	Paused bool       `json:"paused"`
	Pause  *PauseJSON `json:"pause,omitempty"`
	// Created is false when the topic was paused already (the pause in
	// force is shown, unchanged).
	Created bool   `json:"created,omitempty"`
	Message string `json:"message"`
}
