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
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Status is where a dead letter is in its life.
type Status string

// The status machine of a dead letter:
//
//	PENDING -> RETRYING -> RESOLVED            (the broker acknowledged the republish)
//	           RETRYING -> PENDING, count+1    (the republish failed)
//	           RETRYING -> DEAD                (count reached max_retries)
//	PENDING | RETRYING -> DEAD                 (by an operator)
//
// RESOLVED and DEAD are terminal.
const (
	StatusPending  Status = "PENDING"
	StatusRetrying Status = "RETRYING"
	StatusResolved Status = "RESOLVED"
	StatusDead     Status = "DEAD"
)

// Statuses lists every status in display order.
var Statuses = []Status{StatusPending, StatusRetrying, StatusResolved, StatusDead}

// ErrInvalidStatus is returned by ParseStatus.
var ErrInvalidStatus = errors.New("invalid status")

// ParseStatus parses the string form of a status (exact, upper case).
func ParseStatus(s string) (Status, error) {
	for _, st := range Statuses {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("%w %q: must be one of PENDING, RETRYING, RESOLVED, DEAD", ErrInvalidStatus, s)
}

func (s Status) String() string { return string(s) }

// Terminal reports whether no transition leaves s.
func (s Status) Terminal() bool { return s == StatusResolved || s == StatusDead }

// Header is one Kafka-style record header.
type Header struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

// Position is where a dead letter was read from. It is unique per message,
// so a message delivered twice by its source is stored once.
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
	Payload       []byte // exactly as received
	ProducedAt    *time.Time
	Status        Status
	CreatedAt     time.Time
	UpdatedAt     time.Time
	LastRetryAt   *time.Time
	NextRetryAt   *time.Time
}

// IsRetryable is the seed's is_retryable: PENDING or RETRYING with attempts
// left.
func (m *Message) IsRetryable() bool {
	return (m.Status == StatusPending || m.Status == StatusRetrying) && m.RetryCount < m.MaxRetries
}

// NotRetryableReason explains why IsRetryable is false, in the seed's words.
func (m *Message) NotRetryableReason() string {
	return fmt.Sprintf("message is not retryable: status=%s, retry_count=%d/%d", m.Status, m.RetryCount, m.MaxRetries)
}

// AfterFailedAttempt returns the status and count after one failed republish
// (or a replay that came back to the DLQ): back to PENDING with one more
// attempt counted, or DEAD once the count reaches max_retries.
func AfterFailedAttempt(retryCount, maxRetries int) (Status, int) {
	n := retryCount + 1
	if n >= maxRetries {
		return StatusDead, n
	}
	return StatusPending, n
}

// CanTransition reports whether the status machine allows from -> to.
func CanTransition(from, to Status) bool {
	switch from {
	case StatusPending:
		return to == StatusRetrying || to == StatusDead
	case StatusRetrying:
		return to == StatusResolved || to == StatusPending || to == StatusDead
	default:
		return false
	}
}

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
	Key           *string         `json:"key"`
	Headers       []HeaderJSON    `json:"headers"`
	Status        Status          `json:"status"`
	Source        string          `json:"source"`
	Partition     int32           `json:"partition"`
	Offset        int64           `json:"offset"`
	CreatedAt     string          `json:"created_at"`
	UpdatedAt     string          `json:"updated_at"`
	LastRetryAt   *string         `json:"last_retry_at"`
	NextRetryAt   *string         `json:"next_retry_at"`
}

// HeaderJSON shows a header value as text when it is UTF-8, else base64.
type HeaderJSON struct {
	Key         string  `json:"key"`
	Value       *string `json:"value"`
	ValueBase64 *string `json:"value_base64,omitempty"`
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
// as JSON, else null with the raw bytes in payload_base64.
func (m *Message) ToJSON() JSON {
	out := JSON{
		ID:            m.ID.String(),
		Topic:         m.Position.Topic,
		OriginalTopic: m.OriginalTopic,
		ErrorMessage:  m.ErrorMessage,
		RetryCount:    m.RetryCount,
		MaxRetries:    m.MaxRetries,
		Status:        m.Status,
		Source:        m.Position.Source,
		Partition:     m.Position.Partition,
		Offset:        m.Position.Offset,
		CreatedAt:     formatTime(m.CreatedAt),
		UpdatedAt:     formatTime(m.UpdatedAt),
		LastRetryAt:   formatTimePtr(m.LastRetryAt),
		NextRetryAt:   formatTimePtr(m.NextRetryAt),
		Headers:       make([]HeaderJSON, 0, len(m.Headers)),
	}
	if m.Status != StatusPending {
		out.NextRetryAt = nil
	}
	if len(m.Payload) > 0 && json.Valid(m.Payload) {
		out.Payload = json.RawMessage(m.Payload)
	} else {
		out.Payload = json.RawMessage("null")
		if m.Payload != nil {
			b := base64.StdEncoding.EncodeToString(m.Payload)
			out.PayloadBase64 = &b
		}
	}
	if m.Key != nil {
		k := string(m.Key)
		if !isText(m.Key) {
			k = base64.StdEncoding.EncodeToString(m.Key)
		}
		out.Key = &k
	}
	for _, h := range m.Headers {
		hj := HeaderJSON{Key: h.Key}
		if isText(h.Value) {
			v := string(h.Value)
			hj.Value = &v
		} else {
			b := base64.StdEncoding.EncodeToString(h.Value)
			hj.ValueBase64 = &b
		}
		out.Headers = append(out.Headers, hj)
	}
	return out
}

func isText(b []byte) bool {
	for _, r := range string(b) {
		if r == 0xFFFD || (r < 0x20 && r != '\t' && r != '\n' && r != '\r') {
			return false
		}
	}
	return true
}
