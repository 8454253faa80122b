package dlq

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/lifecycled/lifecycled/daemon/internal/enum"
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

// StatusesDescribed declares every status, in display order, with what it
// means: the API's messages, the CLI, the console and docs/values.md come
// from it.
var StatusesDescribed = []enum.Value[Status]{
	{Value: StatusPending, Meaning: "waits for its next automatic retry, or for an operator"},
	{Value: StatusRetrying, Meaning: "being republished by a daemon that holds its claim (a lease)"},
	{Value: StatusResolved, Meaning: "the broker acknowledged a republish: done"},
	{Value: StatusDead, Meaning: "out of automatic retries (or marked dead): waits for an operator"},
}

// Statuses lists every status in display order.
var Statuses = enum.Values(StatusesDescribed)

// ErrInvalidStatus is returned by ParseStatus.
var ErrInvalidStatus = errors.New("invalid status")

// ParseStatus parses the string form of a status (exact, upper case).
func ParseStatus(s string) (Status, error) {
	for _, st := range Statuses {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("%w %q: must be one of %s", ErrInvalidStatus, s, strings.Join(enum.Strings(Statuses), ", "))
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
	// EventBuried: an operator gave up on a PENDING message (a bulk "dead"
	// operation): it is DEAD, with the attempts it had counted, and is no
	// longer retried until revived.
	EventBuried Event = "buried"
)

// Events lists every event.
var Events = []Event{EventClaimed, EventAcked, EventRefused, EventReleased, EventReturned, EventRevived, EventBuried}

// State is the part of a dead letter that the status machine reads and
// writes.
type State struct {
	Status     Status
	RetryCount int // attempts counted so far
	MaxRetries int // attempts allowed
	// NoOriginalTopic: nothing names the topic the message failed on (see
	// Interpret), so it has nowhere to be republished to and is never
	// claimed; an operator can only delete it.
	NoOriginalTopic bool
}

// Retryable reports whether the message may be republished: PENDING or
// RETRYING, with attempts left and an original topic. The stores hold the
// same predicate in SQL, once per dialect, and their contract tests check
// it against this one.
func (s State) Retryable() bool {
	return (s.Status == StatusPending || s.Status == StatusRetrying) && s.RetryCount < s.MaxRetries && !s.NoOriginalTopic
}

// Next is the status machine of a dead letter: the state that e leaves a
// message in state s with, or false when e cannot happen in s (the message
// then does not change).
//
//	event      from                      to
//	claimed    PENDING, RETRYING (*)     RETRYING
//	acked      RETRYING                  RESOLVED
//	refused    RETRYING                  PENDING with one more attempt counted, or DEAD once the count reaches max_retries
//	released   RETRYING                  PENDING, nothing counted; DEAD when returns during the claim used up the attempts
//	returned   RETRYING                  RETRYING with one more attempt counted: the claim keeps its lease, and its outcome decides
//	returned   any other status          PENDING with one more attempt counted, or DEAD once the count reaches max_retries
//	revived    DEAD                      PENDING with no attempts counted
//	buried     PENDING                   DEAD, attempts as counted
//
// (*) with attempts left and an original topic (Retryable); a RETRYING
// message is claimed again only once its lease ran out, which the store
// checks.
//
// This is the one place the rules live: the service decides every outcome
// of a claim with it (Outcome.Apply, which the store calls on the message as
// it finds it), the stores apply returns and revives with it, Retryable is
// the claim's predicate, and the stores' release of expired leases is
// released in SQL (checked against this by their contract tests).
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
			// Returns counted during the claim may have used up the
			// attempts: PENDING would then be a state nothing leaves.
			to.Status = StatusPending
			if s.RetryCount >= s.MaxRetries {
				to.Status = StatusDead
			}
		}
	case EventReturned:
		if s.Status == StatusRetrying {
			// A republish is in flight: taking the message out of its
			// claim would drop the broker's answer to it.
			to.RetryCount++
			break
		}
		to = s.counted()
	case EventRevived:
		if s.Status != StatusDead {
			return s, false
		}
		to.Status, to.RetryCount = StatusPending, 0
	case EventBuried:
		// A RETRYING message is under a claim whose outcome would be lost.
		if s.Status != StatusPending {
			return s, false
		}
		to.Status = StatusDead
	default:
		return s, false
	}
	return to, true
}

// StatusChange is a change of status the status machine decided, for the
// store to write only where the message is still in one of From: a
// conditional write, as River's JobSetStateIfRunning, so that the store
// holds no status rule of its own.
type StatusChange struct {
	From []Status
	To   Status
}

// MarkDead is what a bulk "dead" does to a message: the status machine's
// buried, in the statuses Next lets it happen in.
func MarkDead() StatusChange { return changeOf(EventBuried) }

// changeOf is event e as a conditional write, for an event whose outcome
// depends on the status alone (the counts it keeps as they are).
func changeOf(e Event) StatusChange {
	var c StatusChange
	for _, s := range Statuses {
		to, ok := State{Status: s, MaxRetries: 1}.Next(e)
		if !ok {
			continue
		}
		if c.From != nil && to.Status != c.To {
			panic(fmt.Sprintf("dlq: event %s leaves more than one status: not a status change", e))
		}
		c.From, c.To = append(c.From, s), to.Status
	}
	return c
}

// FromStrings is the statuses of From as text, for the store's list parameter.
func (c StatusChange) FromStrings() []string { return enum.Strings(c.From) }

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
	return State{Status: m.Status, RetryCount: m.RetryCount, MaxRetries: m.MaxRetries, NoOriginalTopic: m.OriginalTopic == ""}
}

// IsRetryable is the seed's is_retryable: PENDING or RETRYING with attempts
// left, and somewhere to republish to.
func (m *Message) IsRetryable() bool { return m.State().Retryable() }

// NotRetryableReason explains why IsRetryable is false, in the seed's words.
func (m *Message) NotRetryableReason() string {
	if m.OriginalTopic == "" && (m.Status == StatusPending || m.Status == StatusRetrying) {
		reason := "nothing names one"
		if strings.HasPrefix(m.LastError, NoOriginalTopicPrefix) {
			reason = m.LastError
		}
		if strings.Contains(reason, ReplayTargetRefused) {
			return fmt.Sprintf("message cannot be retried: %s", strings.TrimPrefix(reason, NoOriginalTopicPrefix))
		}
		return fmt.Sprintf("message cannot be retried: it has no original topic to republish to (%s); "+
			"it is never republished into its DLQ topic %s, where it would only come back: delete it once it is dealt with",
			strings.TrimPrefix(reason, NoOriginalTopicPrefix), m.Position.Topic)
	}
	return fmt.Sprintf("message is not retryable: status=%s, retry_count=%d/%d", m.Status, m.RetryCount, m.MaxRetries)
}

// Outcome is how the attempt on one claimed message ended. The service
// makes it (Finish); the store reads the message as it is when the outcome
// is recorded and writes what Apply decides.
type Outcome struct {
	ID uuid.UUID
	// Source is the message's source, for the metrics.
	Source string
	Event  Event // EventAcked, EventRefused or EventReleased
	// Claimed is the message's state when it was claimed, and ClaimedAt the
	// claim's time (its last_retry_at): the outcome applies only to the
	// message still under that claim, leased by the same owner. A return
	// counted during the claim changes the count, not the claim.
	Claimed   State
	ClaimedAt time.Time
	// At is when the attempt ended, for the history.
	At      time.Time
	Error   string
	Trigger Trigger
	// UID is the operator who asked for the attempt (a manual retry).
	UID *uint32
	// Operation is the bulk operation that made the attempt, if one did.
	Operation *uuid.UUID
	// Attempted: the source tried (or the message could not be sent at
	// all), so the outcome gets an entry in the history. A claim handed back
	// unused gets none.
	Attempted bool
	// NextRetryAt gives the next automatic retry of a message the outcome
	// sends back to PENDING with retryCount attempts counted; nil (or a nil
	// answer) for none.
	NextRetryAt func(retryCount int) *time.Time
}

// Finish is the outcome of e (EventAcked, EventRefused or EventReleased)
// for m, a message as it was claimed. Any other event is a programming
// error, and Finish panics.
func Finish(m Message, e Event) Outcome {
	claimed := m.State()
	claimed.Status = StatusRetrying
	if _, ok := claimed.Next(e); !ok || (e != EventAcked && e != EventRefused && e != EventReleased) {
		panic(fmt.Sprintf("dlq: %s does not finish a claim", e))
	}
	o := Outcome{ID: m.ID, Source: m.Position.Source, Event: e, Claimed: claimed}
	if m.LastRetryAt != nil {
		o.ClaimedAt = *m.LastRetryAt
	}
	return o
}

// Current is a claimed message as the store finds it when an outcome of
// its claim is recorded (read under a row lock or in the writing
// transaction).
type Current struct {
	State      State
	LeaseOwner string
	ClaimedAt  *time.Time
	Attempts   []Attempt
}

// Record is what the store writes for an outcome that applies.
type Record struct {
	To          State
	NextRetryAt *time.Time
	// LastError is the new last_error; nil keeps the one before (an
	// acknowledged republish does not erase why earlier ones failed).
	LastError *string
	// Republished: the broker acknowledged the republish; the store
	// records when (a returning replay is ours only after that).
	Republished bool
	// Attempts is the new history; nil leaves it as it was.
	Attempts []Attempt
	// Name is how the outcome shows in the history and the metrics.
	Name string
}

// Apply decides what o does to cur, for the claim's owner. It is false when
// the message is no longer under o's claim (its lease ran out and it was
// released or claimed again, an operator deleted it): nothing changes, so
// an outcome that arrives late never overwrites a newer one.
func (o Outcome) Apply(owner string, cur Current) (Record, bool) {
	if cur.State.Status != StatusRetrying || cur.LeaseOwner != owner || cur.ClaimedAt == nil || !cur.ClaimedAt.Equal(o.ClaimedAt) {
		return Record{}, false
	}
	to, ok := cur.State.Next(o.Event)
	if !ok {
		return Record{}, false
	}
	r := Record{To: to, Republished: o.Event == EventAcked, Name: outcomeName(o.Event, to)}
	if to.Status == StatusPending && o.NextRetryAt != nil {
		r.NextRetryAt = o.NextRetryAt(to.RetryCount)
	}
	if o.Event != EventAcked && o.Error != "" {
		e := o.Error
		r.LastError = &e
	}
	if o.Attempted {
		r.Attempts = AppendAttempt(cur.Attempts, Attempt{At: o.At, Outcome: r.Name, Error: o.Error, Trigger: o.Trigger, UID: o.UID, Operation: o.Operation})
	}
	return r, true
}

// outcomeNames are the names outcomeName gives.
var outcomeNames = []string{OutcomeResolved, OutcomeFailed, OutcomeDead, OutcomeUnavailable}

// outcomeName is how an outcome that leaves a message in state to shows in
// the history and the metrics.
func outcomeName(e Event, to State) string {
	switch {
	case e == EventAcked:
		return OutcomeResolved
	case to.Status == StatusDead:
		return OutcomeDead
	case e == EventRefused:
		return OutcomeFailed
	default:
		return OutcomeUnavailable
	}
}

// Name is how the outcome shows in the metrics when it was not recorded
// (the message was no longer under its claim).
func (o Outcome) Name() string {
	to, _ := o.Claimed.Next(o.Event)
	return outcomeName(o.Event, to)
}

// AppendAttempt adds a to the history h, keeping the newest MaxAttempts. An
// "unavailable" entry identical to the newest one (same error and trigger)
// is folded into it, counted, with the time of the latest: a source that
// stays down must not push the real attempts out of the history.
func AppendAttempt(h []Attempt, a Attempt) []Attempt {
	out := append([]Attempt(nil), h...)
	if n := len(out); n > 0 && a.Outcome == OutcomeUnavailable {
		last := &out[n-1]
		if last.Outcome == a.Outcome && last.Error == a.Error && last.Trigger == a.Trigger && last.UID == nil && a.UID == nil {
			last.Count = max(last.Count, 1) + 1
			at := a.At
			last.LastAt = &at
			return out
		}
	}
	out = append(out, a)
	if len(out) > MaxAttempts {
		out = out[len(out)-MaxAttempts:]
	}
	return out
}
