package wire

import (
	"encoding/json"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// MessageList is GET /api/v1/dlq/{topic}.
type MessageList struct {
	Messages   []Message  `json:"messages"`
	Pagination Pagination `json:"pagination"`
	// Note says, on an empty answer, that nothing was ever stored for the
	// topic (as DLQ topic or original topic): most likely a typo.
	Note string `json:"note,omitempty"`
	// DidYouMean lists known DLQ topics close to the one asked for.
	DidYouMean []string `json:"did_you_mean,omitempty"`
}

// Pagination describes a page.
type Pagination struct {
	TotalCount int64 `json:"total_count"`
	Page       int   `json:"page"`
	PageSize   int   `json:"page_size"`
	HasNext    bool  `json:"has_next"`
}

// Topic is one entry of GET /api/v1/dlq.
type Topic struct {
	Topic           string           `json:"topic"`
	Counts          map[string]int64 `json:"counts"`
	OldestPendingAt *string          `json:"oldest_pending_at"`
	// UnconfiguredSources counts the topic's PENDING messages by source for
	// sources that are not configured (renamed or removed): they are not
	// retried until the source is configured again. Absent when none.
	UnconfiguredSources map[string]int64 `json:"unconfigured_sources,omitempty"`
	// Paused is the topic's pause when its automatic retries are paused
	// (by an operator or by the auto-pause); absent when they run.
	Paused *Pause `json:"paused,omitempty"`
	// FirstSeen and LastSeen are when its oldest and newest live messages
	// were taken in (null when it has none). ArrivalsPerHour are its live
	// messages taken in per hour, oldest first, over the 24 hours that end
	// with the current one, the first starting at ArrivalsSince.
	FirstSeen       *string `json:"first_seen"`
	LastSeen        *string `json:"last_seen"`
	ArrivalsSince   string  `json:"arrivals_since"`
	ArrivalsPerHour []int64 `json:"arrivals_per_hour"`
}

// RetryAllResult is POST /api/v1/dlq/{topic}/retry-all.
type RetryAllResult struct {
	Retried     int `json:"retried"`
	Failed      int `json:"failed"`
	Unavailable int `json:"unavailable"`
	// NotRecorded were acknowledged by the broker after their claim ran out:
	// not marked RESOLVED. Absent when none.
	NotRecorded int    `json:"not_recorded,omitempty"`
	Message     string `json:"message"`
	// With ?dry_run=true: nothing was republished; Retryable is how many
	// messages a real call would republish now.
	DryRun    bool   `json:"dry_run,omitempty"`
	Retryable *int64 `json:"retryable,omitempty"`
}

// Message is the admin API form of a dead letter.
type Message struct {
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
	Truncated bool        `json:"truncated,omitempty"`
	Key       *string     `json:"key"`
	KeyBase64 Base64Field `json:"key_base64,omitzero"`
	Headers   []Header    `json:"headers"`
	Status    dlq.Status  `json:"status"`
	Source    string      `json:"source"`
	// Position is where the source read it, as the source shows it
	// ("p2@1041" for a Kafka partition and offset); PositionID is the
	// source's opaque id of it, in base64.
	Position   string `json:"position"`
	PositionID string `json:"position_id"`
	// Origin is what the source said of where and why it failed.
	Origin      Origin    `json:"origin"`
	CreatedAt   string    `json:"created_at"`
	UpdatedAt   string    `json:"updated_at"`
	LastRetryAt *string   `json:"last_retry_at"`
	NextRetryAt *string   `json:"next_retry_at"`
	LastError   *string   `json:"last_error"`
	Attempts    []Attempt `json:"attempts"`
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

// Origin is a dead letter's origin as its source read it.
type Origin struct {
	// From says what named original_topic ("the header
	// kafka_dlt-original-topic", "x-death", "the source's topic mapping").
	From string `json:"from"`
	// Configured: the source's configuration chose original_topic, not the
	// message (which is held to the replay targets).
	Configured bool `json:"configured"`
	// ErrorClass is the exception class or reason code; "" when none.
	ErrorClass string `json:"error_class"`
	// Attempts is how often processing failed before it was dead-lettered;
	// 0 when the source cannot tell.
	Attempts int `json:"attempts"`
	// FirstFailedAt is when it first failed; null when unknown.
	FirstFailedAt *string `json:"first_failed_at"`
}

// Header shows a header's key and value each as text when the bytes are
// valid UTF-8; otherwise the text field is null and the *_base64 field
// beside it says what there is (Base64Field): the bytes, or null for a null
// value.
type Header struct {
	Key         *string     `json:"key"`
	KeyBase64   Base64Field `json:"key_base64,omitzero"`
	Value       *string     `json:"value"`
	ValueBase64 Base64Field `json:"value_base64,omitzero"`
	// Type is the value's type for a source with typed headers (AMQP:
	// "int", "long", "bool", ...); absent for plain bytes.
	Type string `json:"type,omitempty"`
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

// Attempt is one entry of a message's attempts history.
type Attempt struct {
	At      string      `json:"at"`
	Outcome string      `json:"outcome"`
	Error   string      `json:"error,omitempty"`
	Trigger dlq.Trigger `json:"trigger,omitempty"`
	UID     *uint32     `json:"uid,omitempty"`
	Count   int         `json:"count,omitempty"`
	LastAt  *string     `json:"last_at,omitempty"`
}

// Topics is GET /api/v1/dlq.
type Topics struct {
	Topics []Topic `json:"topics"`
}

// Deleted is DELETE /api/v1/dlq/messages/{id}.
type Deleted struct {
	Message string `json:"message"`
	Success bool   `json:"success"`
}

// MessageChange is POST /api/v1/dlq/messages/{id}/retry and .../revive:
// the message's status after the change (revive adds its attempts, reset).
// Fields in the order of the answers' keys before it had a type.
type MessageChange struct {
	ID         string     `json:"id"`
	MaxRetries *int       `json:"max_retries,omitempty"`
	Message    string     `json:"message"`
	RetryCount *int       `json:"retry_count,omitempty"`
	Status     dlq.Status `json:"status"`
}

// ReplayRequest is the body of POST /api/v1/dlq/messages/{id}/replay:
// every field optional; a header set to null is removed.
type ReplayRequest struct {
	Payload       json.RawMessage    `json:"payload,omitempty"`
	PayloadBase64 *string            `json:"payload_base64,omitempty"`
	Headers       map[string]*string `json:"headers,omitempty"`
	Key           *string            `json:"key,omitempty"`
	Topic         *string            `json:"topic,omitempty"`
}

// PauseRequest is the body of POST /api/v1/dlq/{topic}/pause.
type PauseRequest struct {
	Reason string `json:"reason,omitempty"`
}
