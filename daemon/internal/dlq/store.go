package dlq

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// Incoming is a dead letter as a source delivered it, ready to be stored.
type Incoming struct {
	Position      Position
	OriginalTopic string
	ErrorMessage  string
	Key           []byte
	Headers       []Header
	Payload       []byte
	ProducedAt    *time.Time
	// FeedbackOf is the x-dlq-id header: a message this daemon republished
	// failed again and came back. Its record is updated instead of a new one
	// created (unless that record no longer exists).
	FeedbackOf *uuid.UUID
}

// IngestOptions carries the policy the store applies to a batch.
type IngestOptions struct {
	Now         time.Time
	MaxRetries  int
	NextRetryAt *time.Time // first automatic retry of new messages; nil when automatic retries are off
	// FeedbackRetryAt gives the next automatic retry of a message that came
	// back after its attempt number retryCount; nil disables automatic retries.
	FeedbackRetryAt func(retryCount int) *time.Time
}

// IngestResult counts what a batch did.
type IngestResult struct {
	Inserted   int // new records
	Duplicates int // positions already stored (a redelivery)
	Feedback   int // records updated by a returning replay
	Dead       int // of those, records that reached max_retries
}

// ListFilter selects a page of a topic.
type ListFilter struct {
	Topic    string
	Status   Status // "" for every status
	Page     int    // 1-based
	PageSize int
}

// TopicSummary is one row of GET /api/v1/dlq.
type TopicSummary struct {
	Topic           string
	Counts          map[Status]int64
	OldestPendingAt *time.Time
}

// Claim identifies who takes a message for republishing and until when.
type Claim struct {
	Owner      string
	Now        time.Time
	LeaseUntil time.Time
}

// Cursor walks a topic in creation order for retry-all.
type Cursor struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// Outcome is how one claimed message's republish ended.
type Outcome struct {
	ID uuid.UUID
	// Acked: the broker acknowledged it; RESOLVED.
	Acked bool
	// Counted: the attempt failed for this message (not because the source
	// was unavailable), so it counts against max_retries.
	Counted     bool
	NextRetryAt *time.Time
	Error       string
}

// Store is what the dead-letter manager needs from the state store.
type Store interface {
	IngestDLQ(ctx context.Context, batch []Incoming, opts IngestOptions) (IngestResult, error)
	GetDLQ(ctx context.Context, id uuid.UUID) (*Message, error)
	ListDLQ(ctx context.Context, f ListFilter) ([]Message, int64, error)
	DeleteDLQ(ctx context.Context, id uuid.UUID) error
	DLQTopics(ctx context.Context) ([]TopicSummary, error)
	// ClaimDLQ moves one retryable message to RETRYING under a lease. It
	// returns derrors.ErrNotFound, or a *NotRetryableError.
	ClaimDLQ(ctx context.Context, id uuid.UUID, c Claim) (*Message, error)
	// ClaimDLQTopic claims up to limit retryable messages of a topic created
	// after the cursor, in creation order.
	ClaimDLQTopic(ctx context.Context, topic string, after *Cursor, limit int, c Claim) ([]Message, error)
	// CountRetryableDLQTopic counts what ClaimDLQTopic would claim from the
	// start of the topic: the dry run of retry-all.
	CountRetryableDLQTopic(ctx context.Context, topic string) (int64, error)
	// ClaimDueDLQ claims PENDING messages whose next_retry_at has come.
	ClaimDueDLQ(ctx context.Context, limit int, c Claim) ([]Message, error)
	// FinishDLQ records the outcome of claimed messages; only rows still
	// leased by owner change.
	FinishDLQ(ctx context.Context, owner string, now time.Time, outcomes []Outcome) error
	// ReleaseExpiredDLQLeases returns RETRYING messages whose lease ended to
	// PENDING, due now, without counting an attempt.
	ReleaseExpiredDLQLeases(ctx context.Context, now time.Time) (int64, error)
}

// NotRetryableError is a 409: the message exists but cannot be retried now.
type NotRetryableError struct {
	Message *Message
	Reason  string
}

func (e *NotRetryableError) Error() string { return e.Reason }
