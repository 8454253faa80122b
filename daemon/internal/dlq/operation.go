package dlq

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/enum"
)

// Bulk operations (POST /api/v1/dlq/operations): one action on every
// message a filter or an id list matched when the operation started. The
// operation is stored and leased like a deletion job, so it survives a
// restart and runs on one daemon at a time; its counters move in the
// transaction that records what it did, so they never say more or less
// than the store holds.

// OperationAction is what a bulk operation does to each message.
type OperationAction string

// Actions of a bulk operation.
const (
	ActionRetry    OperationAction = "retry"     // republish to the original topic, as a manual retry
	ActionRevive   OperationAction = "revive"    // DEAD back to PENDING
	ActionDelete   OperationAction = "delete"    // remove, recorded in the history
	ActionDead     OperationAction = "dead"      // PENDING to DEAD: stop retrying it
	ActionReplayTo OperationAction = "replay_to" // replay unchanged to another topic
)

// OperationActionsDescribed declares every action with what it does: the
// API's messages, the CLI's help and completion, the console's options and
// docs/values.md come from it. A new action is declared here and handled
// where the runner applies actions (operation_page.go).
var OperationActionsDescribed = []enum.Value[OperationAction]{
	{Value: ActionRetry, Meaning: "republish to the original topic, like a manual retry: RESOLVED on the broker's acknowledgement"},
	{Value: ActionRevive, Meaning: "DEAD to PENDING, attempts reset"},
	{Value: ActionDelete, Meaning: "remove; the history keeps the deletion"},
	{Value: ActionDead, Meaning: "PENDING to DEAD: stop retrying it until revived"},
	{Value: ActionReplayTo, Meaning: "replay unchanged to `target_topic`; the stored message does not change"},
}

// OperationActions lists every action.
var OperationActions = enum.Values(OperationActionsDescribed)

// ParseOperationAction parses an action's name.
func ParseOperationAction(s string) (OperationAction, error) {
	for _, a := range OperationActions {
		if string(a) == s {
			return a, nil
		}
	}
	return "", fmt.Errorf("%w: action %q: must be one of %s", derrors.ErrInvalid, s, strings.Join(enum.Strings(OperationActions), ", "))
}

// OperationState is where an operation is.
type OperationState string

// States of an operation. RUNNING covers an operation waiting for a
// daemon to take it (after a restart) as well as one in progress.
const (
	OperationRunning   OperationState = "RUNNING"
	OperationCompleted OperationState = "COMPLETED"
	OperationCancelled OperationState = "CANCELLED"
	OperationFailed    OperationState = "FAILED"
)

// OperationStatesDescribed declares every state of an operation with what
// it means (docs/values.md, the CLI, the console).
var OperationStatesDescribed = []enum.Value[OperationState]{
	{Value: OperationRunning, Meaning: "in progress, or waiting for a daemon to take it over (after a restart)"},
	{Value: OperationCompleted, Meaning: "every message was acted on (each item's outcome says how)"},
	{Value: OperationCancelled, Meaning: "an operator stopped it; what it did stays done"},
	{Value: OperationFailed, Meaning: "it could not go on (its error says why); what it did stays done"},
}

// OperationStates lists every state of an operation.
var OperationStates = enum.Values(OperationStatesDescribed)

// What became of one message of an operation (Operation.Outcomes). The
// first group counts as succeeded, the rest as failed.
const (
	ItemRetried    = "retried"     // the broker acknowledged it and it is RESOLVED
	ItemRevived    = "revived"     // back to PENDING
	ItemDeleted    = "deleted"     // removed
	ItemMarkedDead = "marked_dead" // now DEAD
	ItemReplayed   = "replayed"    // the broker acknowledged the replay

	// ItemNotRecorded: the broker acknowledged the republish, but the
	// message's claim had run out by then, so RESOLVED was not recorded.
	ItemNotRecorded = "not_recorded"
	ItemRefused     = "refused"     // the broker refused it; the attempt counted
	ItemUnavailable = "unavailable" // no source could send it; nothing counted, it stays PENDING
	// ItemSkipped: the message was not in a state the action applies to
	// when its turn came (resolved or deleted meanwhile, being retried,
	// not DEAD for a revive); nothing changed.
	ItemSkipped = "skipped"
	ItemFailed  = "failed" // the action failed for another reason (error says)
)

// ItemSucceeded reports whether an item outcome counts as succeeded.
func ItemSucceeded(outcome string) bool {
	switch outcome {
	case ItemRetried, ItemRevived, ItemDeleted, ItemMarkedDead, ItemReplayed:
		return true
	}
	return false
}

// OperationFilter is what an operation works on: the messages a search
// filter matches (live ones; the archive is never acted on), or an
// explicit id list. Exactly one of the two is used.
type OperationFilter struct {
	Search SearchFilter
	IDs    []uuid.UUID
}

// Operation is a bulk operation as stored.
type Operation struct {
	ID     uuid.UUID
	Action OperationAction
	State  OperationState
	// Filter is the request's filter (or id list) as JSON, for display.
	Filter      []byte
	TargetTopic string
	Rate        float64 // messages per second; 0: as fast as it goes
	Matched     int64
	Done        int64
	Succeeded   int64
	Failed      int64
	// Outcomes counts Done by item outcome (ItemRetried, ...).
	Outcomes map[string]int64
	// Position is the seq of the last item of the run done from the first
	// (items are numbered from 1); DoneRanges holds the runs recorded beyond it.
	Position          int64
	DoneRanges        []SeqRange
	CreatedAt         time.Time
	UpdatedAt         time.Time
	StartedAt         *time.Time
	FinishedAt        *time.Time
	RequestedByUID    *uint32
	CancelRequestedAt *time.Time
	CancelledByUID    *uint32
	LeaseOwner        string
	LeaseExpiresAt    *time.Time
	LastError         string
}

// Finished reports whether the operation is over.
func (o *Operation) Finished() bool { return o.State != OperationRunning }

// OperationItem is one message of an operation's set.
type OperationItem struct {
	Seq int64
	ID  uuid.UUID
}

// maxItemError bounds the error kept for an item of an operation.
const maxItemError = 2000

// ItemErrorText is an item's error as it is stored: valid UTF-8, no NUL
// (PostgreSQL's text refuses both, and the page's transaction would fail),
// at most maxItemError bytes cut on a character boundary. Item errors come
// from brokers, plugins and stored messages, so anything can be in them.
func ItemErrorText(s string) string { return sanitize(s, maxItemError) }

// ItemGone is why an item was skipped that is no longer a live message.
const ItemGone = "the message was deleted or archived"

// ItemResult is what became of one item.
type ItemResult struct {
	Seq     int64
	ID      uuid.UUID
	Outcome string
	Error   string
	// UnderClaim: skipped only because the message was RETRYING under
	// another claim whose lease had not run out (the retry loop's, a
	// single retry's, or one a daemon left when it died). A bulk retry
	// does not count it: it tries it again once that claim has ended.
	UnderClaim bool
}

// OperationProgress is what a page of an operation did, recorded with the
// page's changes: the items after After up to Position are done, or, when
// Done is set, the items in those ranges only (a page some of whose items
// are left for later).
type OperationProgress struct {
	Operation uuid.UUID
	Owner     string
	Now       time.Time
	After     int64
	Position  int64
	Done      []SeqRange
	Results   []ItemResult
	// Sent: what the page did happened outside the store (the broker has
	// the messages), so it is counted even when the operation ended (was
	// cancelled) while the page was under way. A page of an operation
	// another daemon holds now is not counted here: that daemon counts its
	// messages (SkippedItem).
	Sent bool
}

// ProgressCount is how the store counts a page's progress: the rule that
// decides who counts what once an operation may have changed hands or
// ended, kept here with the operation so that the store only applies it.
type ProgressCount int

const (
	// CountRefused: the operation is held by another daemon (it counts the
	// page's messages: SkippedItem), or ended without this page having
	// sent anything; nothing is counted and the store answers
	// derrors.ErrLeaseLost.
	CountRefused ProgressCount = iota
	// CountRanges: the page's owner still holds the running operation:
	// its ranges are recorded as done, and a range done already is a lease
	// lost (the page was counted by a daemon that held the operation).
	CountRanges
	// CountItems: the operation ended while the broker had the page
	// (Sent): each item nobody counted yet is counted, one by one.
	CountItems
)

// CountOf decides how page p of an operation in state held by owner is
// counted.
func (p OperationProgress) CountOf(state OperationState, owner string) ProgressCount {
	switch {
	case state == OperationRunning && owner == p.Owner:
		return CountRanges
	case state != OperationRunning && p.Sent:
		return CountItems
	}
	return CountRefused
}

// Ranges is what p records as done.
func (p OperationProgress) Ranges() []SeqRange {
	if p.Done != nil {
		return p.Done
	}
	return []SeqRange{{After: p.After, Upto: p.Position}}
}

// RetryPage is a page of a bulk retry, for OperationStore.RetryDLQPage.
type RetryPage struct {
	// Operation is the bulk retry the page is of: its items' answers
	// recorded by a daemon that lost it are read.
	Operation uuid.UUID
	Claim     Claim
	Items     []OperationItem
	// Send is called once, with the messages of Items claimed for the
	// retry (in Items' order) and, for the others, why each was not. It
	// republishes the claimed ones and returns an outcome of each (Finish
	// of the message as given), and the page's progress to record with
	// them given what was recorded; a nil progress records the outcomes
	// alone (the source was down: the page is done again later).
	Send func(claimed []Message, skipped []ItemResult) ([]Outcome, func([]Recorded) *OperationProgress)
	// Hold is called before Send by a store whose claim is a lease
	// written before the send (not a row lock held over it): it renews
	// the lease of the claimed messages until the release it returns is
	// called, once their outcomes are recorded.
	Hold func(claimed []Message) (release func())
	// Now is the time the outcomes are recorded at.
	Now func() time.Time
}

// PageAction is a page of an action that only changes the state store
// (revive, delete, dead), applied in one transaction with its progress.
type PageAction struct {
	Action    OperationAction
	Items     []OperationItem
	UID       *uint32
	Operation uuid.UUID
	Now       time.Time
	// ReviveFor is the revive of a message of a DLQ topic (its policy's
	// attempts and first retry); used by revive only.
	ReviveFor func(dlqTopic string) Revive
}

// OperationStore keeps bulk operations.
type OperationStore interface {
	// CreateDLQOperation stores op (RUNNING) with the ids f matches now,
	// oldest first, and returns it with Matched set.
	CreateDLQOperation(ctx context.Context, op Operation, f OperationFilter) (*Operation, error)
	// CountDLQOperation is the dry run: how many messages f matches now,
	// and the first sample of them.
	CountDLQOperation(ctx context.Context, f OperationFilter, sample int) (int64, []Message, error)
	GetDLQOperation(ctx context.Context, id uuid.UUID) (*Operation, error)
	// ListDLQOperations lists operations newest first; running only when
	// asked.
	ListDLQOperations(ctx context.Context, limit int, runningOnly bool) ([]Operation, error)
	// ClaimDLQOperation takes a RUNNING operation nobody holds (or whose
	// lease ran out) under a lease for owner; nil when there is none.
	ClaimDLQOperation(ctx context.Context, owner string, now, leaseUntil time.Time) (*Operation, error)
	// RenewDLQOperationLease extends the lease; derrors.ErrLeaseLost when
	// owner no longer holds it.
	RenewDLQOperationLease(ctx context.Context, id uuid.UUID, owner string, until time.Time) error
	// DLQOperationItems returns up to limit items after position, in order.
	DLQOperationItems(ctx context.Context, id uuid.UUID, after int64, limit int) ([]OperationItem, error)
	// DLQOperationFailures returns up to limit items that did not succeed.
	DLQOperationFailures(ctx context.Context, id uuid.UUID, limit int) ([]ItemResult, error)
	// RetryDLQPage claims the retryable messages of a page like ClaimDLQ
	// (a RETRYING one only once its lease ran out), sends them with
	// p.Send and records the outcomes it returns like FinishDLQ, with the
	// page's progress. A store may claim without writing the claim, under
	// row locks held until the outcomes are written: one row version per
	// message instead of two. It returns what was recorded of each
	// outcome. When the owner no longer holds the operation, the outcomes
	// are recorded all the same (the broker has the messages) without the
	// progress, with what the broker answered for each item (Answered),
	// and the error is derrors.ErrLeaseLost with what was recorded; on
	// another error after Send, nothing of the page was recorded. An item
	// with an answer recorded so is not claimed again: Send gets it among
	// the others, with that answer as its outcome. A message that is not
	// claimed for another reason is reported with SkippedItem.
	RetryDLQPage(ctx context.Context, p RetryPage) ([]Recorded, error)
	// ApplyDLQOperationPage applies a page of a store-only action and
	// records its progress in one transaction; derrors.ErrLeaseLost when
	// the owner no longer holds the operation.
	ApplyDLQOperationPage(ctx context.Context, a PageAction, p OperationProgress) (OperationProgress, error)
	// AdvanceDLQOperation records progress made outside the store (a
	// replay); derrors.ErrLeaseLost when the owner no longer holds it.
	AdvanceDLQOperation(ctx context.Context, p OperationProgress) error
	// FinishDLQOperation ends an operation held by owner in state, with
	// lastError; CANCELLED instead of COMPLETED when a cancel came first.
	FinishDLQOperation(ctx context.Context, id uuid.UUID, owner string, state OperationState, lastError string, now time.Time) error
	// ReleaseDLQOperation hands an operation back (a shutdown) so that the
	// next daemon to look takes it at once.
	ReleaseDLQOperation(ctx context.Context, id uuid.UUID, owner string) error
	// CancelDLQOperation asks a RUNNING operation to stop; one nobody
	// holds is CANCELLED at once. derrors.ErrNotFound, or
	// derrors.ErrConflict when it is over.
	CancelDLQOperation(ctx context.Context, id uuid.UUID, uid *uint32, now time.Time) (*Operation, error)
	// DLQOperationCancelRequested reports whether a cancel was asked.
	DLQOperationCancelRequested(ctx context.Context, id uuid.UUID) (bool, error)
}
