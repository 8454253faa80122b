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
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/sdk"
)

// Header is one message header. Key and value are bytes, kept and
// republished exactly as they came; neither needs to be UTF-8. Type is the
// value's type for a source with typed headers (AMQP), sent back with it.
type Header struct {
	Key   []byte
	Value []byte
	Type  string
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
	// Operation is the bulk operation that made the attempt or revive.
	Operation *uuid.UUID `json:"operation,omitempty"`
	// Count and LastAt: this many identical "unavailable" outcomes in a
	// row, the latest at LastAt, folded into one entry (AppendAttempt).
	Count  int        `json:"count,omitempty"`
	LastAt *time.Time `json:"last_at,omitempty"`
}

// MaxAttempts is how many history entries a message keeps (the newest).
const MaxAttempts = 50

// Position is where a dead letter was read from: the source, the topic
// (queue, table) and the source's opaque id of the message in it (see
// sdk.Position). With the digest of what was read there (Incoming.Digest)
// it is unique per message, so a message delivered twice by its source is
// stored once, while a new message at a position seen before (its topic
// was deleted and created again) is new.
type Position struct {
	Source  string
	Topic   string
	ID      []byte
	Display string
}

// LogPosition is the position of a record in a partitioned log, as a
// Kafka source reports it (sdk.LogPosition).
func LogPosition(source, topic string, partition int32, offset int64) Position {
	p := sdk.LogPosition(topic, partition, offset)
	return Position{Source: source, Topic: topic, ID: p.ID, Display: p.Display}
}

// Offset is the offset of a LogPosition; -1 for any other position.
func (p Position) Offset() int64 {
	if _, offset, ok := sdk.ParseLogPosition(p.ID); ok {
		return offset
	}
	return -1
}

// Partition is the partition of a LogPosition; -1 for any other position.
func (p Position) Partition() int32 {
	if partition, _, ok := sdk.ParseLogPosition(p.ID); ok {
		return partition
	}
	return -1
}

func (p Position) String() string {
	return fmt.Sprintf("%s/%s/%s", p.Source, p.Topic, p.Display)
}

// Origin is what the source said of where a dead letter failed, beside
// OriginalTopic and ErrorMessage.
type Origin struct {
	// From is what named the original topic ("the header
	// kafka_dlt-original-topic", "x-death"); "" for a message stored
	// before sources reported it (protocol 2 rows: read by the Kafka
	// conventions, see legacyOrigin).
	From string
	// Configured: the source's configuration chose the original topic,
	// not the message, so it is not held to the replay targets.
	Configured bool
	// ErrorClass is the exception class or reason code, "" when none.
	ErrorClass string
	// Attempts is how often processing failed before it was
	// dead-lettered, 0 when unknown; FirstFailedAt when it first failed.
	Attempts      int
	FirstFailedAt *time.Time
}

// Message is a stored dead letter.
type Message struct {
	ID            uuid.UUID
	Position      Position
	OriginalTopic string
	Origin        Origin
	ErrorMessage  string
	RetryCount    int
	MaxRetries    int
	Key           []byte
	Headers       []Header
	// Payload is exactly as received: nil for a null value (a Kafka
	// tombstone, republished as one), empty for an empty value; nil too
	// when the message was too large to take in whole (Truncated).
	Payload []byte
	// Truncated: the message was too large to take in whole and its value
	// was not kept, so it cannot be republished.
	Truncated   bool
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
	// Group is the id of its failure group (FailureGroup), computed at
	// intake; "" for a message stored before groups existed and not yet
	// backfilled.
	Group string
	// Archived: read from the archive (a search with include_archived).
	Archived bool
}
