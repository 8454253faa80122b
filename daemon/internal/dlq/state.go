package dlq

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Status is where a dead letter is in its life. Next moves it from one
// status to another.
type Status string

// Statuses of a dead letter.
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

// Event is something that happens to a dead letter.
type Event string

// Events of a dead letter.
const (
	// EventClaimed: a republish takes the message under a lease.
	EventClaimed Event = "claimed"
	// EventAcked: the broker acknowledged the republish.
	EventAcked Event = "acked"
	// EventRefused: the broker refused the message itself (too large,
	// rejected topic), or there was nothing to send (the value was not kept
	// at intake). The attempt counts against max_retries.
	EventRefused Event = "refused"
	// EventReleased: a claim ended without an attempt that counts: the
	// source could not try, the claim was handed back unused, or its lease
	// ran out (the daemon died).
	EventReleased Event = "released"
	// EventReturned: a replay failed again and came back to its DLQ topic
	// (x-dlq-id). It counts against max_retries.
	EventReturned Event = "returned"
	// EventRevived: an operator gave a DEAD message another chance.
	EventRevived Event = "revived"
)

// Events lists every event.
var Events = []Event{EventClaimed, EventAcked, EventRefused, EventReleased, EventReturned, EventRevived}

// State is the part of a dead letter that the status machine reads and
// writes.
type State struct {
	Status     Status
	RetryCount int // attempts counted so far
	MaxRetries int // attempts allowed
}

// Retryable reports whether the message may be republished: PENDING or
// RETRYING, with attempts left. The stores hold the same predicate in SQL,
// once per dialect, and their contract tests check it against this one.
func (s State) Retryable() bool {
	return (s.Status == StatusPending || s.Status == StatusRetrying) && s.RetryCount < s.MaxRetries
}

// Next is the status machine of a dead letter: the state that e leaves a
// message in state s with, or false when e cannot happen in s (the message
// then does not change).
//
//	event      from                      to
//	claimed    PENDING, RETRYING (*)     RETRYING
//	acked      RETRYING                  RESOLVED
//	refused    RETRYING                  PENDING with one more attempt counted, or DEAD once the count reaches max_retries
//	released   RETRYING                  PENDING, nothing counted
//	returned   any status                PENDING with one more attempt counted, or DEAD once the count reaches max_retries
//	revived    DEAD                      PENDING with no attempts counted
//
// (*) with attempts left (Retryable); a RETRYING message is claimed again
// only once its lease ran out, which the store checks.
//
// This is the one place the rules live: the service decides every outcome
// of a claim with it (Finish) and hands the result to the store, the stores
// apply returns and revives with it, and Retryable is the claim's predicate.
func (s State) Next(e Event) (State, bool) {
	to := s
	switch e {
	case EventClaimed:
		if !s.Retryable() {
			return s, false
		}
		to.Status = StatusRetrying
	case EventAcked, EventRefused, EventReleased:
		if s.Status != StatusRetrying {
			return s, false
		}
		switch e {
		case EventAcked:
			to.Status = StatusResolved
		case EventRefused:
			to = s.counted()
		default:
			to.Status = StatusPending
		}
	case EventReturned:
		to = s.counted()
	case EventRevived:
		if s.Status != StatusDead {
			return s, false
		}
		to.Status, to.RetryCount = StatusPending, 0
	default:
		return s, false
	}
	return to, true
}

// counted is s after one more failed attempt.
func (s State) counted() State {
	s.RetryCount++
	if s.RetryCount >= s.MaxRetries {
		s.Status = StatusDead
	} else {
		s.Status = StatusPending
	}
	return s
}

// State is the message's status-machine state.
func (m *Message) State() State {
	return State{Status: m.Status, RetryCount: m.RetryCount, MaxRetries: m.MaxRetries}
}

// IsRetryable is the seed's is_retryable: PENDING or RETRYING with attempts
// left.
func (m *Message) IsRetryable() bool { return m.State().Retryable() }

// NotRetryableReason explains why IsRetryable is false, in the seed's words.
func (m *Message) NotRetryableReason() string {
	return fmt.Sprintf("message is not retryable: status=%s, retry_count=%d/%d", m.Status, m.RetryCount, m.MaxRetries)
}

// Outcome is how the attempt on one claimed message ended, and what that
// does to its row. Finish makes it.
type Outcome struct {
	ID    uuid.UUID
	Event Event // EventAcked, EventRefused or EventReleased
	// From is the row as it was claimed and To the state Next gives it. The
	// store writes To only to a row that is still in From's status and
	// count under the owner's lease, so an outcome that arrives after its
	// lease ran out never overwrites a newer one.
	From, To State
	// NextRetryAt is the next automatic retry of a message that goes back
	// to PENDING; nil for none.
	NextRetryAt *time.Time
	Error       string
	// Attempt is appended to the message's history; nil for a claim handed
	// back without an attempt.
	Attempt *Attempt
}

// Finish is the outcome of e (EventAcked, EventRefused or EventReleased)
// for m, a message as it was claimed. Any other event is a programming
// error, and Finish panics.
func Finish(m Message, e Event) Outcome {
	from := State{Status: StatusRetrying, RetryCount: m.RetryCount, MaxRetries: m.MaxRetries}
	to, ok := from.Next(e)
	if !ok || (e != EventAcked && e != EventRefused && e != EventReleased) {
		panic(fmt.Sprintf("dlq: %s does not finish a claim", e))
	}
	return Outcome{ID: m.ID, Event: e, From: from, To: to}
}

// outcomeNames are the names Outcome.Name gives.
var outcomeNames = []string{OutcomeResolved, OutcomeFailed, OutcomeDead, OutcomeUnavailable}

// Name is how the outcome shows in the history and the metrics.
func (o Outcome) Name() string {
	switch {
	case o.Event == EventAcked:
		return OutcomeResolved
	case o.Event == EventRefused && o.To.Status == StatusDead:
		return OutcomeDead
	case o.Event == EventRefused:
		return OutcomeFailed
	default:
		return OutcomeUnavailable
	}
}

// Republished reports whether the broker acknowledged this republish: the
// store then records when (a returning replay is ours only after that).
func (o Outcome) Republished() bool { return o.Event == EventAcked }

// LastError is what the store keeps as the message's last_error: the
// failure, or nil to keep the one before (an acknowledged republish does
// not erase why earlier ones failed).
func (o Outcome) LastError() *string {
	if o.Event == EventAcked || o.Error == "" {
		return nil
	}
	return &o.Error
}
