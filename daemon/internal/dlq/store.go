package dlq

import (
	"context"
	"fmt"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"

	"github.com/google/uuid"
)

// Incoming is a dead letter as a source delivered it, ready to be stored.
type Incoming struct {
	Position      Position
	OriginalTopic string
	Origin        Origin
	ErrorMessage  string
	Key           []byte
	Headers       []Header
	Payload       []byte
	ProducedAt    *time.Time
	// Digest identifies what was read at the position (Digest): a position
	// stored with the same digest is a redelivery, with another one a new
	// dead letter (the topic was deleted and created again).
	Digest []byte
	// NoJSON stores no JSON copy of the payload (the state store refused
	// it); the payload's bytes are kept all the same.
	NoJSON bool
	// FeedbackOf is the x-dlq-id header: a message this daemon republished
	// may have failed again and come back. Its record is updated instead of
	// a new one created only when that record exists, the broker has
	// acknowledged a republish of it, and this message came back on the
	// record's own source and DLQ topic with the very value bytes that
	// were republished; anything else (a header copied by a framework onto
	// another dead letter) is stored as a new record. Every return's
	// position is recorded with its digest, so that reading the DLQ topic
	// again never applies a return twice.
	FeedbackOf *uuid.UUID
	// FeedbackAttempt is the x-dlq-retry-count header of a returning
	// replay: the number of the attempt that failed again (0 when absent).
	// A return of an attempt already counted is the same failure written
	// twice, and is not counted again.
	FeedbackAttempt int
	// Truncated: the message was too large to take in whole and its value
	// was not kept (Payload is nil, which otherwise is a null value).
	Truncated bool
	// Dead stores the message as DEAD (it was too large to take in whole:
	// Truncated), with LastError and Attempt saying why. LastError also
	// says why a message has no OriginalTopic.
	Dead      bool
	LastError string
	Attempt   *Attempt
	// Redelivered: a source with per-delivery positions says this delivery
	// may not be the first. The store then takes one of the stored
	// deliveries with the same digest whose acknowledgement is not
	// confirmed, instead of storing it again.
	Redelivered bool
	// PerDelivery: the position names one delivery; the store keeps it
	// among the unacknowledged until the source's Commit of it succeeds.
	PerDelivery bool
}

// DeliveryState is what became of the Commit of a per-delivery source's
// stored deliveries, which decides whether a redelivery may take them.
type DeliveryState int

const (
	// DeliveriesCommitting: a Commit is under way; until its outcome is
	// known they may be acknowledged, and no redelivery takes them.
	DeliveriesCommitting DeliveryState = iota + 1
	// DeliveriesConfirmed: acknowledged; forgotten.
	DeliveriesConfirmed
	// DeliveriesNotCommitted: the source says none was acknowledged and
	// the broker delivers them again; a redelivery takes them.
	DeliveriesNotCommitted
)

// IngestOptions carries the policy the store applies to a batch.
type IngestOptions struct {
	Now        time.Time
	MaxRetries int
	// FirstRetryAt gives the first automatic retry of each new message,
	// called once per message so that each gets its own jitter; nil when
	// automatic retries are off.
	FirstRetryAt func() *time.Time
	// FeedbackRetryAt gives the next automatic retry of a message that came
	// back after its attempt number retryCount; nil disables automatic retries.
	FeedbackRetryAt func(retryCount int) *time.Time
}

// IngestResult counts what a batch did.
type IngestResult struct {
	Inserted   int // new records
	Duplicates int // positions already stored with the same digest, or returns already applied (a redelivery)
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
	// UnconfiguredSources counts the topic's PENDING messages by source,
	// for sources that are not configured (Service.Topics fills it in).
	UnconfiguredSources map[string]int64
	// Paused is the topic's pause, if its automatic retries are paused
	// (Service.Topics fills it in).
	Paused *TopicPause
}

// SourcePending is how many PENDING messages a source has on a DLQ topic.
type SourcePending struct {
	Source  string
	Topic   string
	Pending int64
}

// Recorded is what FinishDLQ did with one outcome: Applied, with the Record
// written, or not (the message was no longer under the outcome's claim).
type Recorded struct {
	Applied bool
	Record  Record
}

// Claim identifies who takes a message for republishing and until when.
type Claim struct {
	Owner      string
	Now        time.Time
	LeaseUntil time.Time
	// Sources limits ClaimDueDLQ to messages of these sources (the
	// configured ones): a message whose source was renamed or removed is
	// left alone instead of being claimed and handed back on every pass.
	Sources []string
	// SkipTopics: ClaimDueDLQ leaves these DLQ topics' messages alone
	// (their policy turns automatic retries off). Paused topics are left
	// alone by the store itself.
	SkipTopics []string
}

// Sending is what one daemon (Owner) is sending now, under claims of its
// own. A lease of these that ran out (its renewals waited behind other
// statements) is not over: the send is under way and its outcome will be
// recorded, so neither the release of expired leases nor a claim of this
// daemon may take the message over and send it a second time. Another
// daemon's leases, and this one's for messages it is not sending, expire
// as they always did. The zero value keeps nothing.
type Sending struct {
	Owner string
	IDs   []uuid.UUID
}

// Cursor walks a topic in creation order for retry-all.
type Cursor struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// Revive is what ReviveDLQ needs: a message in status From (DEAD) goes to
// To, the state Next gives it on EventRevived (PENDING, no attempts
// counted, the current max_retries), due for a retry at NextRetryAt.
type Revive struct {
	Now         time.Time
	From        Status
	To          State
	NextRetryAt *time.Time
	Attempt     Attempt
}

// Store is what the dead-letter manager needs from the state store.
type Store interface {
	HistoryStore
	OperationStore
	PauseStore
	SearchStore
	IngestDLQ(ctx context.Context, batch []Incoming, opts IngestOptions) (IngestResult, error)
	// MarkDLQDeliveries records what became of a Commit of these positions
	// of a per-delivery source (DeliveryState), at now.
	MarkDLQDeliveries(ctx context.Context, source string, positions []Position, state DeliveryState, now time.Time) error
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
	// ClaimDueDLQ claims PENDING messages of c.Sources whose next_retry_at
	// has come.
	ClaimDueDLQ(ctx context.Context, limit int, c Claim) ([]Message, error)
	// FinishDLQ records the outcomes of claimed messages: it reads each
	// message as it is now, under a row lock, and writes what Outcome.Apply
	// decides for owner; a message no longer under the outcome's claim does
	// not change. The answer is in the order of outcomes.
	FinishDLQ(ctx context.Context, owner string, now time.Time, outcomes []Outcome) ([]Recorded, error)
	// PendingBySourceDLQ counts PENDING messages by source and DLQ topic,
	// for the sources not in configured.
	PendingBySourceDLQ(ctx context.Context, configured []string) ([]SourcePending, error)
	// RenewDLQClaims extends to c.LeaseUntil the lease of the messages
	// among ids still RETRYING under the claim of c.Owner made at c.Now,
	// and returns how many it renewed.
	RenewDLQClaims(ctx context.Context, ids []uuid.UUID, c Claim) (int64, error)
	// ReleaseExpiredDLQLeases returns RETRYING messages whose lease ended to
	// PENDING, due now, without counting an attempt, but for those sending
	// names: this daemon's own claims still being sent.
	ReleaseExpiredDLQLeases(ctx context.Context, now time.Time, sending Sending) (int64, error)
	// ReviveDLQ moves a DEAD message back to PENDING. It returns
	// derrors.ErrNotFound, or a *NotRevivableError when the message is not
	// DEAD or was not kept whole.
	ReviveDLQ(ctx context.Context, id uuid.UUID, r Revive) (*Message, error)
}

// NotRetryableError is a 409: the message exists but cannot be retried now.
type NotRetryableError struct {
	Message *Message
	Reason  string
}

func (e *NotRetryableError) Error() string { return e.Reason }

// Unwrap makes it a derrors.ErrConflict: the request is well-formed, the
// message's state refuses it.
func (e *NotRetryableError) Unwrap() error { return derrors.ErrConflict }

// NotRetryable explains why m, as it is now, cannot be claimed for a
// retry: it is being retried (RETRYING under a lease), or not retryable.
func NotRetryable(m *Message) *NotRetryableError {
	if m.Status == StatusRetrying && m.IsRetryable() {
		return &NotRetryableError{Message: m, Reason: fmt.Sprintf("message is being retried: status=%s, retry_count=%d/%d",
			m.Status, m.RetryCount, m.MaxRetries)}
	}
	return &NotRetryableError{Message: m, Reason: m.NotRetryableReason()}
}

// NotRevivableError is a 409: the message exists but cannot be revived.
type NotRevivableError struct {
	Message *Message
	Reason  string
}

func (e *NotRevivableError) Error() string { return e.Reason }

// Unwrap makes it a derrors.ErrConflict.
func (e *NotRevivableError) Unwrap() error { return derrors.ErrConflict }

// NotRevivable explains why m cannot be revived.
func NotRevivable(m *Message) *NotRevivableError {
	if m.Status == StatusDead && m.OriginalTopic == "" {
		return &NotRevivableError{Message: m, Reason: "message cannot be revived: it has no original topic to republish to"}
	}
	if m.Truncated {
		return &NotRevivableError{Message: m, Reason: "message cannot be revived: it was too large to take in whole and its value was not kept"}
	}
	return &NotRevivableError{Message: m, Reason: fmt.Sprintf("message is not DEAD: status=%s, retry_count=%d/%d; only DEAD messages can be revived",
		m.Status, m.RetryCount, m.MaxRetries)}
}
