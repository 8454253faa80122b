package adminapi

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

// DLQTriage is what the triage routes need: edit-and-replay, history and
// topic pauses.
type DLQTriage interface {
	Replay(ctx context.Context, id uuid.UUID, req dlq.ReplayRequest, uid uint32) (*dlq.Replay, error)
	History(ctx context.Context, id uuid.UUID) ([]dlq.HistoryEvent, error)
	Pause(ctx context.Context, topic, reason string, uid uint32) (dlq.TopicPause, bool, error)
	Resume(ctx context.Context, topic string, uid uint32) error
	SourceConfigured(name string) bool
}

// DLQTriageRoutes serves edit-and-replay, history and pause/resume (issue
// 13). Like every POST, replay and pause take an Idempotency-Key, and the
// audit log has the caller's uid; the history has it too.
func DLQTriageRoutes(svc DLQTriage) func(*http.ServeMux) {
	return func(mux *http.ServeMux) {
		g := routeGroup{mux: mux, scope: ScopeDLQ}
		g.handle("POST /api/v1/dlq/messages/{id}/replay", func(r *http.Request) (any, error) {
			if err := strictRequest(r, bodyAllowed, "dry_run"); err != nil {
				return nil, err
			}
			id, err := parseID(r.PathValue("id"))
			if err != nil {
				return nil, err
			}
			dryRun, err := parseDryRun(r.URL.Query())
			if err != nil {
				return nil, err
			}
			req, err := parseReplayBody(r)
			if err != nil {
				return nil, err
			}
			req.DryRun = dryRun
			rep, err := svc.Replay(r.Context(), id, req, Peer(r.Context()).UID)
			if err != nil {
				return nil, notFoundMessage(id, err)
			}
			return replayJSON(rep, svc.SourceConfigured(rep.Original.Position.Source)), nil
		})
		g.handle("GET /api/v1/dlq/messages/{id}/history", func(r *http.Request) (any, error) {
			id, err := parseID(r.PathValue("id"))
			if err != nil {
				return nil, err
			}
			events, err := svc.History(r.Context(), id)
			if err != nil {
				return nil, notFoundMessage(id, err)
			}
			return historyJSON(events), nil
		})
		g.handle("POST /api/v1/dlq/{topic}/pause", func(r *http.Request) (any, error) {
			if err := strictRequest(r, bodyAllowed); err != nil {
				return nil, err
			}
			topic, err := parseTopic(r.PathValue("topic"))
			if err != nil {
				return nil, err
			}
			reason, err := parsePauseBody(r)
			if err != nil {
				return nil, err
			}
			p, created, err := svc.Pause(r.Context(), topic, reason, Peer(r.Context()).UID)
			if err != nil {
				return nil, err
			}
			msg := fmt.Sprintf("automatic retries of topic %s paused", topic)
			if !created {
				msg = fmt.Sprintf("topic %s was paused already", topic)
			}
			return wire.PauseResult{Topic: topic, Paused: true, Pause: pauseJSON(&p), Created: created, Message: msg}, nil
		})
		g.handle("POST /api/v1/dlq/{topic}/resume", func(r *http.Request) (any, error) {
			if err := strictRequest(r, noBody); err != nil {
				return nil, err
			}
			topic, err := parseTopic(r.PathValue("topic"))
			if err != nil {
				return nil, err
			}
			if err := svc.Resume(r.Context(), topic, Peer(r.Context()).UID); err != nil {
				return nil, err
			}
			return wire.PauseResult{Topic: topic, Paused: false, Message: fmt.Sprintf("automatic retries of topic %s resumed", topic)}, nil
		})
	}
}

const replayShape = `{"payload": <JSON>, "payload_base64": "...", "headers": {"name": "value"}, "key": "...", "topic": "..."}`

// parseReplayBody reads an edit-and-replay body: every field optional.
func parseReplayBody(r *http.Request) (dlq.ReplayRequest, error) {
	var req dlq.ReplayRequest
	data, err := readBody(r)
	if err != nil || data == nil {
		return req, err
	}
	var body wire.ReplayRequest
	if err := strictJSONNullable(data, &body, "empty or "+replayShape, keysIn("headers")); err != nil {
		return req, err
	}
	// A JSON null is "not given", like a missing field.
	hasJSON := len(body.Payload) > 0 && string(body.Payload) != "null"
	switch {
	case hasJSON && body.PayloadBase64 != nil:
		return req, invalidField("payload", "give payload or payload_base64, not both")
	case hasJSON:
		req.Payload = append([]byte{}, body.Payload...)
	case body.PayloadBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*body.PayloadBase64)
		if err != nil {
			return req, invalidField("payload_base64", "not standard base64: %v", err)
		}
		req.Payload = b
	}
	for name := range body.Headers {
		if name == "" {
			return req, invalidField("headers", "a header name must not be empty")
		}
	}
	req.Headers = body.Headers
	if body.Key != nil {
		req.Key, req.KeySet = []byte(*body.Key), true
	}
	if body.Topic != nil {
		t, err := parseTopic(*body.Topic)
		if err != nil {
			return req, invalidField("topic", "%v", err)
		}
		req.Topic = t
	}
	return req, nil
}

// parsePauseBody reads {"reason": "..."} from a pause body; "" when none.
func parsePauseBody(r *http.Request) (string, error) {
	data, err := readBody(r)
	if err != nil || data == nil {
		return "", err
	}
	var body wire.PauseRequest
	if err := strictJSON(data, &body, `empty or {"reason": "..."}`); err != nil {
		return "", err
	}
	if body.Reason == "" {
		// Stored as the default reason, which is not what the body said.
		return "", invalidField("reason", "empty: give a reason, or send no body")
	}
	return body.Reason, nil
}
