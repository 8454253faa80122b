package adminapi

import (
	"encoding/base64"
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// TimeFormat is how every time in the API is written: RFC 3339 with
// milliseconds and a numeric offset, as the seed shows.
const TimeFormat = "2006-01-02T15:04:05.000-07:00"

// MessageJSON is the admin API form of a dead letter.
type MessageJSON struct {
	ID            string          `json:"id"`
	Topic         string          `json:"topic"`
	OriginalTopic string          `json:"original_topic"`
	ErrorMessage  string          `json:"error_message"`
	RetryCount    int             `json:"retry_count"`
	MaxRetries    int             `json:"max_retries"`
	Payload       json.RawMessage `json:"payload"`
	PayloadBase64 *string         `json:"payload_base64,omitempty"`
	// Truncated: the message was larger than the plugin RPC limit at intake
	// and its value was not kept; it cannot be republished.
	Truncated   bool          `json:"truncated,omitempty"`
	Key         *string       `json:"key"`
	KeyBase64   *string       `json:"key_base64,omitempty"`
	Headers     []HeaderJSON  `json:"headers"`
	Status      dlq.Status    `json:"status"`
	Source      string        `json:"source"`
	Partition   int32         `json:"partition"`
	Offset      int64         `json:"offset"`
	CreatedAt   string        `json:"created_at"`
	UpdatedAt   string        `json:"updated_at"`
	LastRetryAt *string       `json:"last_retry_at"`
	NextRetryAt *string       `json:"next_retry_at"`
	LastError   *string       `json:"last_error"`
	Attempts    []AttemptJSON `json:"attempts"`
	// SourceConfigured is false when no [[dlq_source]] of this name is
	// configured (renamed or removed): the message is not retried
	// automatically, and a manual retry answers 503 until it is.
	SourceConfigured bool `json:"source_configured"`
	// DLQTopic is the topic it was read from (the same as topic, under the
	// name the search contract gives it).
	DLQTopic string `json:"dlq_topic"`
	// Group is its failure group id; "" until a message stored before
	// groups existed is backfilled.
	Group string `json:"group"`
	// Archived: it was found in the archive (search with include_archived).
	Archived bool `json:"archived"`
}

// HeaderJSON shows a header's key and value each as text when the bytes are
// valid UTF-8; otherwise the text field is null and the bytes are in the
// *_base64 field, which is present only then (the marker).
type HeaderJSON struct {
	Key         *string `json:"key"`
	KeyBase64   *string `json:"key_base64,omitempty"`
	Value       *string `json:"value"`
	ValueBase64 *string `json:"value_base64,omitempty"`
}

// AttemptJSON is one entry of a message's attempts history.
type AttemptJSON struct {
	At      string      `json:"at"`
	Outcome string      `json:"outcome"`
	Error   string      `json:"error,omitempty"`
	Trigger dlq.Trigger `json:"trigger,omitempty"`
	UID     *uint32     `json:"uid,omitempty"`
	Count   int         `json:"count,omitempty"`
	LastAt  *string     `json:"last_at,omitempty"`
}

// textOrBase64 shows bytes as text when they are valid UTF-8 (JSON carries
// any valid UTF-8 exactly, control characters escaped), else as base64.
func textOrBase64(b []byte) (text, b64 *string) {
	if utf8.Valid(b) {
		s := string(b)
		return &s, nil
	}
	s := base64.StdEncoding.EncodeToString(b)
	return nil, &s
}

func formatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

func formatTimePtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := formatTime(*t)
	return &s
}

// messageJSON renders a message for the API: the payload as JSON when it
// parses as JSON, else null with the raw bytes in payload_base64.
// sourceConfigured says whether its source is configured now.
func messageJSON(m *dlq.Message, sourceConfigured bool) MessageJSON {
	out := MessageJSON{
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
		Partition:        m.Position.Partition,
		Offset:           m.Position.Offset,
		CreatedAt:        formatTime(m.CreatedAt),
		UpdatedAt:        formatTime(m.UpdatedAt),
		LastRetryAt:      formatTimePtr(m.LastRetryAt),
		NextRetryAt:      formatTimePtr(m.NextRetryAt),
		Headers:          make([]HeaderJSON, 0, len(m.Headers)),
	}
	if m.Status != dlq.StatusPending {
		out.NextRetryAt = nil
	}
	switch {
	case m.Truncated():
		out.Payload, out.Truncated = json.RawMessage("null"), true
	case len(m.Payload) > 0 && json.Valid(m.Payload):
		out.Payload = json.RawMessage(m.Payload)
	default:
		out.Payload = json.RawMessage("null")
		b := base64.StdEncoding.EncodeToString(m.Payload)
		out.PayloadBase64 = &b
	}
	if m.Key != nil {
		out.Key, out.KeyBase64 = textOrBase64(m.Key)
	}
	for _, h := range m.Headers {
		var hj HeaderJSON
		hj.Key, hj.KeyBase64 = textOrBase64(h.Key)
		hj.Value, hj.ValueBase64 = textOrBase64(h.Value)
		out.Headers = append(out.Headers, hj)
	}
	if m.LastError != "" {
		out.LastError = &m.LastError
	}
	out.Attempts = make([]AttemptJSON, len(m.Attempts))
	for i, a := range m.Attempts {
		out.Attempts[i] = AttemptJSON{At: formatTime(a.At), Outcome: a.Outcome, Error: a.Error, Trigger: a.Trigger, UID: a.UID,
			Count: a.Count, LastAt: formatTimePtr(a.LastAt)}
	}
	return out
}
