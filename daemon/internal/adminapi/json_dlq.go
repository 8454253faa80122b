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
	PayloadBase64 Base64Field     `json:"payload_base64,omitzero"`
	// Truncated: the message was larger than the plugin RPC limit at intake
	// and its value was not kept; it cannot be republished.
	Truncated   bool          `json:"truncated,omitempty"`
	Key         *string       `json:"key"`
	KeyBase64   Base64Field   `json:"key_base64,omitzero"`
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
// valid UTF-8; otherwise the text field is null and the *_base64 field
// beside it says what there is (Base64Field): the bytes, or null for a null
// value.
type HeaderJSON struct {
	Key         *string     `json:"key"`
	KeyBase64   Base64Field `json:"key_base64,omitzero"`
	Value       *string     `json:"value"`
	ValueBase64 Base64Field `json:"value_base64,omitzero"`
}

// Base64Field is a *_base64 field of the API, beside a text field (or, for
// a payload, the JSON field payload) that is null. Absent: the bytes are in
// the field beside it. Null: there are no bytes at all, a null value (a
// Kafka tombstone, a null key or header value), which is not an empty one.
// A string: the bytes, which are not UTF-8 text (a payload: not JSON), in
// standard base64; "" is zero bytes.
type Base64Field struct {
	Present bool
	Value   *string
}

// IsZero makes omitzero leave the field out when it is not Present.
func (f Base64Field) IsZero() bool { return !f.Present }

// Null reports whether the field says there are no bytes (a null value).
func (f Base64Field) Null() bool { return f.Present && f.Value == nil }

// MarshalJSON implements json.Marshaler.
func (f Base64Field) MarshalJSON() ([]byte, error) {
	if f.Value == nil {
		return []byte("null"), nil
	}
	return json.Marshal(*f.Value)
}

// UnmarshalJSON implements json.Unmarshaler; encoding/json calls it for a
// null too, which is how Present tells null from absent.
func (f *Base64Field) UnmarshalJSON(b []byte) error {
	f.Present, f.Value = true, nil
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	f.Value = &s
	return nil
}

// base64Of is the field that holds b.
func base64Of(b []byte) Base64Field {
	if b == nil {
		return Base64Field{Present: true}
	}
	s := base64.StdEncoding.EncodeToString(b)
	return Base64Field{Present: true, Value: &s}
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
// any valid UTF-8 exactly, control characters escaped), else as base64; a
// null value (nil) as null text and a null base64 field.
func textOrBase64(b []byte) (*string, Base64Field) {
	if b != nil && utf8.Valid(b) {
		s := string(b)
		return &s, Base64Field{}
	}
	return nil, base64Of(b)
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
	case m.Truncated:
		out.Payload, out.Truncated = json.RawMessage("null"), true
	case len(m.Payload) > 0 && json.Valid(m.Payload):
		out.Payload = json.RawMessage(m.Payload)
	default:
		out.Payload, out.PayloadBase64 = json.RawMessage("null"), base64Of(m.Payload)
	}
	out.Key, out.KeyBase64 = textOrBase64(m.Key)
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
