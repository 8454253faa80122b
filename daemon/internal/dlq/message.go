// Package dlq keeps dead letters: it takes them in from DLQ sources, stores
// them with their error, and replays them to their original topic, by hand
// (retry, retry-all) or automatically with backoff, until the broker has
// acknowledged them (RESOLVED) or they used up their attempts (DEAD).
//
// A message is never marked RESOLVED unless the broker acknowledged the
// republish, and a message is never lost between the source and the store:
// source offsets are committed only after the batch was stored.
package dlq

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Header is one Kafka-style record header. Key and value are bytes, kept
// and republished exactly as they came; neither needs to be UTF-8.
type Header struct {
	Key   []byte
	Value []byte
}

// Attempt outcomes, as the attempts history shows them.
const (
	OutcomeResolved    = "resolved"    // the broker acknowledged the republish
	OutcomeFailed      = "failed"      // the broker refused it; counted
	OutcomeDead        = "dead"        // refused, and that was the last attempt
	OutcomeUnavailable = "unavailable" // the source could not try; not counted
	OutcomeReturned    = "returned"    // the replay failed again and came back; counted
	OutcomeRevived     = "revived"     // an operator gave a DEAD message another chance
	OutcomeTruncated   = "truncated"   // too large to take in whole; stored DEAD
)

// Attempt is one entry of a message's history: what happened, when, why.
type Attempt struct {
	At      time.Time `json:"at"`
	Outcome string    `json:"outcome"`
	Error   string    `json:"error,omitempty"`
	Trigger Trigger   `json:"trigger,omitempty"`
	UID     *uint32   `json:"uid,omitempty"` // who revived it
	// Count and LastAt: this many identical "unavailable" outcomes in a
	// row, the latest at LastAt, folded into one entry (AppendAttempt).
	Count  int        `json:"count,omitempty"`
	LastAt *time.Time `json:"last_at,omitempty"`
}

// MaxAttempts is how many history entries a message keeps (the newest).
const MaxAttempts = 50

// Position is where a dead letter was read from. With the digest of what
// was read there (Incoming.Digest) it is unique per message, so a message
// delivered twice by its source is stored once, while a new message at a
// position seen before (its topic was deleted and created again) is new.
type Position struct {
	Source    string `json:"source"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

func (p Position) String() string {
	return fmt.Sprintf("%s/%s/%d/%d", p.Source, p.Topic, p.Partition, p.Offset)
}

// Message is a stored dead letter.
type Message struct {
	ID            uuid.UUID
	Position      Position
	OriginalTopic string
	ErrorMessage  string
	RetryCount    int
	MaxRetries    int
	Key           []byte
	Headers       []Header
	// Payload is exactly as received; nil when the message was too large to
	// take in whole (Truncated), so it cannot be republished.
	Payload     []byte
	ProducedAt  *time.Time
	Status      Status
	CreatedAt   time.Time
	UpdatedAt   time.Time
	LastRetryAt *time.Time
	NextRetryAt *time.Time
	// LastError is why the last republish did not resolve it; "" if none failed.
	LastError string
	// Attempts is the history, oldest first (the newest MaxAttempts).
	Attempts []Attempt
	// RepublishedAt is when the broker last acknowledged a republish.
	RepublishedAt *time.Time
}

// Truncated reports whether the message was too large to take in whole:
// its value was not kept, so it cannot be republished.
func (m *Message) Truncated() bool { return m.Payload == nil }

// JSON is the admin API form of a message.
type JSON struct {
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
	Status      Status        `json:"status"`
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
	At      string  `json:"at"`
	Outcome string  `json:"outcome"`
	Error   string  `json:"error,omitempty"`
	Trigger Trigger `json:"trigger,omitempty"`
	UID     *uint32 `json:"uid,omitempty"`
	Count   int     `json:"count,omitempty"`
	LastAt  *string `json:"last_at,omitempty"`
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

// TimeFormat is RFC 3339 with milliseconds and a numeric offset, as the seed shows.
const TimeFormat = "2006-01-02T15:04:05.000-07:00"

func formatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

func formatTimePtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := formatTime(*t)
	return &s
}

// ToJSON renders a message for the API: the payload as JSON when it parses
// as JSON, else null with the raw bytes in payload_base64. sourceConfigured
// says whether its source is configured now.
func (m *Message) ToJSON(sourceConfigured bool) JSON {
	out := JSON{
		SourceConfigured: sourceConfigured,
		ID:               m.ID.String(),
		Topic:            m.Position.Topic,
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
	if m.Status != StatusPending {
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
