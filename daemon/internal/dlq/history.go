package dlq

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// Kinds of history events (GET /api/v1/dlq/messages/{id}/history).
const (
	// KindIntake: the message was taken in; its detail names the source
	// position. It is made from the message's own row, not stored twice.
	KindIntake = "intake"
	// KindAttempt: a republish attempt (outcome, error, trigger; uid when an
	// operator asked for it).
	KindAttempt = "attempt"
	// KindReturned: a replay failed again and came back (x-dlq-id).
	KindReturned = "returned"
	// KindRevived: an operator gave a DEAD message another chance.
	KindRevived = "revived"
	// KindReplayed: an operator replayed the message, maybe edited; the
	// detail links the replay (its id, topic and what was changed).
	KindReplayed = "replayed"
	// KindDeleted: an operator deleted the message.
	KindDeleted = "deleted"
	// KindMarkedDead: an operator gave up on a PENDING message (a bulk
	// "dead" operation, named in the detail): it is DEAD.
	KindMarkedDead = "dead"
	// KindArchived: retention moved the message into the archive.
	KindArchived = "archived"
)

// HistoryEvent is one entry of a message's history. Detail is a JSON
// object whose fields depend on Kind (docs/reference.md lists them).
type HistoryEvent struct {
	At     time.Time
	Kind   string
	Detail []byte
	UID    *uint32
}

// HistoryStore keeps the history of dead letters. Attempts, returns,
// revives and archiving are recorded by the store itself, in the
// transaction of the change they record; these methods read the history
// and record the operator actions that change no message.
type HistoryStore interface {
	// DLQHistory returns a message's history, oldest first, starting with
	// its intake when the message (live or archived) is still stored. It
	// returns derrors.ErrNotFound when there is neither a message nor an
	// event with this id.
	DLQHistory(ctx context.Context, id uuid.UUID) ([]HistoryEvent, error)
	// RecordDLQEvent adds an event to the history of a stored message; it
	// returns derrors.ErrNotFound when the message is not stored (live).
	RecordDLQEvent(ctx context.Context, id uuid.UUID, e HistoryEvent) error
	// DeleteDLQAs deletes a message and records e (KindDeleted) in one
	// transaction; derrors.ErrNotFound when there is none.
	DeleteDLQAs(ctx context.Context, id uuid.UUID, e HistoryEvent) error
}

// History returns the history of a message, oldest first: what the
// message went through even after it was deleted (its deletion is the last
// event) or archived.
func (s *Service) History(ctx context.Context, id uuid.UUID) ([]HistoryEvent, error) {
	return s.store.DLQHistory(ctx, id)
}

// DeleteAs removes one message and records who did (uid) in its history.
func (s *Service) DeleteAs(ctx context.Context, id uuid.UUID, uid uint32) error {
	now := s.now()
	return s.store.DeleteDLQAs(ctx, id, HistoryEvent{At: now, Kind: KindDeleted, Detail: []byte(`{"action":"delete"}`), UID: &uid})
}
