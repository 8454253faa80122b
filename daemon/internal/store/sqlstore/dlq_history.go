package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// HistorySQL is the SQL of dlq.HistoryStore and dlq.PauseStore in one
// dialect (postgres/dlq_history.go, sqlite/dlq_history.go). Attempts,
// returns, revives and archiving are written by triggers (migration
// 011), in the transaction of the change.
type HistorySQL struct {
	// Events reads a message's events in order (by time, then as written:
	// a deleted message's intake, kept at its deletion, comes first):
	// (id) -> at, kind, detail, uid.
	Events string
	// Intake reads what the intake event shows, from the live row or the
	// archived one: (id) -> created_at, source, dlq_topic, position
	// display, original_topic, error_message, archived.
	Intake string
	// Insert adds an event to a live message: (id, at, kind, detail, uid);
	// no row when there is no such message.
	Insert string
	// InsertAny adds an event whatever is stored: (id, at, kind, detail, uid).
	InsertAny string
	// KeepIntake stores the intake event of a message about to be deleted,
	// which can no longer be made from its row: (id).
	KeepIntake string
	// Pause pauses a topic unless it is: (topic, at, reason, auto, uid);
	// PauseOf reads one: (topic); pauses reads those in force; resume:
	// (topic, now).
	Pause, PauseOf, Pauses, Resume string
	// CountReturns counts a DLQ topic's returns since a time, and since its
	// last resume: (topic, since).
	CountReturns string
}

// DLQHistory implements dlq.HistoryStore.DLQHistory for both dialects.
func (s *Store) DLQHistory(ctx context.Context, id uuid.UUID) ([]dlq.HistoryEvent, error) {
	var out []dlq.HistoryEvent
	err := s.conn.Snapshot(ctx, func(q Querier) error {
		var (
			created          time.Time
			source, topic    string
			position         string
			original, errMsg string
			archived         bool
		)
		err := q.QueryRow(ctx, s.sql.History.Intake, id).Scan(&created, &source, &topic, &position, &original, &errMsg, &archived)
		switch {
		case err == nil:
			detail, _ := json.Marshal(map[string]any{"source": source, "topic": topic, "position": position,
				"original_topic": original, "error": errMsg})
			out = append(out, dlq.HistoryEvent{At: created, Kind: dlq.KindIntake, Detail: detail})
		case !errors.Is(err, derrors.ErrNotFound):
			return fmt.Errorf("read dead letter %s: %w", id, err)
		}
		events, err := QueryAll(ctx, q, scanEvent, s.sql.History.Events, id)
		if err != nil {
			return fmt.Errorf("read history of %s: %w", id, err)
		}
		out = append(out, events...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("dlq message %s: %w", id, derrors.ErrNotFound)
	}
	return out, nil
}

func scanEvent(sc Scanner) (dlq.HistoryEvent, error) {
	var (
		e   dlq.HistoryEvent
		uid *int64
	)
	if err := sc.Scan(&e.At, &e.Kind, &e.Detail, &uid); err != nil {
		return e, err
	}
	e.At = e.At.UTC()
	if uid != nil && *uid >= 0 && *uid <= int64(^uint32(0)) {
		u := uint32(*uid)
		e.UID = &u
	}
	if len(e.Detail) == 0 {
		e.Detail = []byte("{}")
	}
	return e, nil
}

// eventArgs are an event's arguments to insert and InsertAny.
func eventArgs(id uuid.UUID, e dlq.HistoryEvent) []any {
	var uid *int64
	if e.UID != nil {
		u := int64(*e.UID)
		uid = &u
	}
	detail := e.Detail
	if len(detail) == 0 {
		detail = []byte("{}")
	}
	return []any{id, e.At, e.Kind, string(detail), uid}
}

// RecordDLQEvent implements dlq.HistoryStore.RecordDLQEvent.
func (s *Store) RecordDLQEvent(ctx context.Context, id uuid.UUID, e dlq.HistoryEvent) error {
	n, err := s.conn.Exec(ctx, s.sql.History.Insert, eventArgs(id, e)...)
	if err != nil {
		return fmt.Errorf("record a history event: %w", err)
	}
	return foundOne(n, "dlq message %s", id)
}

// DeleteDLQAs implements dlq.HistoryStore.DeleteDLQAs: the deletion and
// its event in one transaction.
func (s *Store) DeleteDLQAs(ctx context.Context, id uuid.UUID, e dlq.HistoryEvent) error {
	return s.conn.Tx(ctx, func(q Querier) error {
		if _, err := q.Exec(ctx, s.sql.History.KeepIntake, id); err != nil {
			return fmt.Errorf("keep the intake of a deleted dead letter: %w", err)
		}
		n, err := q.Exec(ctx, s.sql.DLQ.Delete, id)
		if err != nil {
			return fmt.Errorf("delete dead letter: %w", err)
		}
		if err := foundOne(n, "dlq message %s", id); err != nil {
			return err
		}
		if _, err := q.Exec(ctx, s.sql.History.InsertAny, eventArgs(id, e)...); err != nil {
			return fmt.Errorf("record the deletion: %w", err)
		}
		return nil
	})
}

func scanPause(sc Scanner) (dlq.TopicPause, error) {
	var (
		p   dlq.TopicPause
		uid *int64
	)
	if err := sc.Scan(&p.Topic, &p.PausedAt, &p.Reason, &p.Auto, &uid); err != nil {
		return p, err
	}
	p.PausedAt = p.PausedAt.UTC()
	if uid != nil && *uid >= 0 && *uid <= int64(^uint32(0)) {
		u := uint32(*uid)
		p.UID = &u
	}
	return p, nil
}

// PauseDLQTopic implements dlq.PauseStore.PauseDLQTopic.
func (s *Store) PauseDLQTopic(ctx context.Context, p dlq.TopicPause) (dlq.TopicPause, bool, error) {
	var (
		out     dlq.TopicPause
		created bool
	)
	var uid *int64
	if p.UID != nil {
		u := int64(*p.UID)
		uid = &u
	}
	err := s.conn.Tx(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, s.sql.History.Pause, p.Topic, p.PausedAt, p.Reason, p.Auto, uid)
		if err != nil {
			return fmt.Errorf("pause topic %s: %w", p.Topic, err)
		}
		created = n == 1
		out, err = scanPause(q.QueryRow(ctx, s.sql.History.PauseOf, p.Topic))
		if err != nil {
			return fmt.Errorf("read the pause of %s: %w", p.Topic, err)
		}
		return nil
	})
	return out, created, err
}

// ResumeDLQTopic implements dlq.PauseStore.ResumeDLQTopic.
func (s *Store) ResumeDLQTopic(ctx context.Context, topic string, now time.Time) (bool, error) {
	n, err := s.conn.Exec(ctx, s.sql.History.Resume, topic, now)
	if err != nil {
		return false, fmt.Errorf("resume topic %s: %w", topic, err)
	}
	return n == 1, nil
}

// DLQTopicPauses implements dlq.PauseStore.DLQTopicPauses.
func (s *Store) DLQTopicPauses(ctx context.Context) ([]dlq.TopicPause, error) {
	ps, err := QueryAll(ctx, s.conn, scanPause, s.sql.History.Pauses)
	if err != nil {
		return nil, fmt.Errorf("list paused topics: %w", err)
	}
	return ps, nil
}

// CountReturnsDLQ implements dlq.PauseStore.CountReturnsDLQ.
func (s *Store) CountReturnsDLQ(ctx context.Context, topic string, since time.Time) (int64, error) {
	var n int64
	if err := s.conn.QueryRow(ctx, s.sql.History.CountReturns, topic, since).Scan(&n); err != nil {
		return 0, fmt.Errorf("count returned replays of %s: %w", topic, err)
	}
	return n, nil
}
