package adminapi

import (
	"encoding/base64"
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

// base64Of is the field that holds b.
func base64Of(b []byte) wire.Base64Field {
	if b == nil {
		return wire.Base64Field{Present: true}
	}
	s := base64.StdEncoding.EncodeToString(b)
	return wire.Base64Field{Present: true, Value: &s}
}

// textOrBase64 shows bytes as text when they are valid UTF-8 (JSON carries
// any valid UTF-8 exactly, control characters escaped), else as base64; a
// null value (nil) as null text and a null base64 field.
func textOrBase64(b []byte) (*string, wire.Base64Field) {
	if b != nil && utf8.Valid(b) {
		s := string(b)
		return &s, wire.Base64Field{}
	}
	return nil, base64Of(b)
}

func formatTime(t time.Time) string { return t.UTC().Format(wire.TimeFormat) }

func formatTimePtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := formatTime(*t)
	return &s
}

// headerJSON renders a header: text or base64, and its type.
func headerJSON(h dlq.Header) wire.Header {
	var hj wire.Header
	hj.Key, hj.KeyBase64 = textOrBase64(h.Key)
	hj.Value, hj.ValueBase64 = textOrBase64(h.Value)
	hj.Type = h.Type
	return hj
}

// messageJSON renders a message for the API: the payload as JSON when it
// parses as JSON, else null with the raw bytes in payload_base64.
// sourceConfigured says whether its source is configured now.
func messageJSON(m *dlq.Message, sourceConfigured bool) wire.Message {
	out := wire.Message{
		SourceConfigured: sourceConfigured,
		ID:               m.ID.String(),
		Topic:            m.Position.Topic,
		DLQTopic:         m.Position.Topic,
		Group:            m.Group,
		Archived:         m.Archived,
		OriginalTopic:    m.OriginalTopic,
		ErrorMessage:     m.ErrorMessage,
		RetryCount:       m.RetryCount,
		MaxRetries:       m.MaxRetries,
		Status:           m.Status,
		Source:           m.Position.Source,
		Position:         m.Position.Display,
		PositionID:       base64.StdEncoding.EncodeToString(m.Position.ID),
		Origin: wire.Origin{From: m.Origin.From, Configured: m.Origin.Configured, ErrorClass: m.Origin.ErrorClass,
			Attempts: m.Origin.Attempts, FirstFailedAt: formatTimePtr(m.Origin.FirstFailedAt)},
		CreatedAt:   formatTime(m.CreatedAt),
		UpdatedAt:   formatTime(m.UpdatedAt),
		LastRetryAt: formatTimePtr(m.LastRetryAt),
		NextRetryAt: formatTimePtr(m.NextRetryAt),
		Headers:     make([]wire.Header, 0, len(m.Headers)),
	}
	if m.Status != dlq.StatusPending {
		out.NextRetryAt = nil
	}
	switch {
	case m.Truncated:
		out.Payload, out.Truncated = json.RawMessage("null"), true
	case len(m.Payload) > 0 && json.Valid(m.Payload):
		out.Payload = json.RawMessage(m.Payload)
	default:
		out.Payload, out.PayloadBase64 = json.RawMessage("null"), base64Of(m.Payload)
	}
	out.Key, out.KeyBase64 = textOrBase64(m.Key)
	for _, h := range m.Headers {
		out.Headers = append(out.Headers, headerJSON(h))
	}
	if m.LastError != "" {
		out.LastError = &m.LastError
	}
	out.Attempts = make([]wire.Attempt, len(m.Attempts))
	for i, a := range m.Attempts {
		out.Attempts[i] = wire.Attempt{At: formatTime(a.At), Outcome: a.Outcome, Error: a.Error, Trigger: a.Trigger, UID: a.UID,
			Count: a.Count, LastAt: formatTimePtr(a.LastAt)}
	}
	return out
}

// topicJSON renders a topic with when its live messages were taken in (a
// topic without live messages, listed for its pause or read before its
// messages left: null times and 24 empty hours).
func topicJSON(t dlq.TopicSummary, a dlq.TopicActivity) wire.Topic {
	tj := wire.Topic{Topic: t.Topic, Counts: map[string]int64{}, UnconfiguredSources: t.UnconfiguredSources, Paused: pauseJSON(t.Paused),
		FirstSeen: optionalTime(a.FirstSeen), LastSeen: optionalTime(a.LastSeen), ArrivalsPerHour: a.Arrivals}
	for _, s := range dlq.Statuses {
		tj.Counts[string(s)] = t.Counts[s]
	}
	if t.OldestPendingAt != nil {
		tj.OldestPendingAt = optionalTime(*t.OldestPendingAt)
	}
	if tj.ArrivalsPerHour == nil {
		tj.ArrivalsPerHour = []int64{}
	} else {
		tj.ArrivalsSince = formatTime(a.ArrivalsFrom)
	}
	return tj
}

// optionalTime is t in the API's format, or nil for the zero time.
func optionalTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(wire.TimeFormat)
	return &s
}
