package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// Bulk operations on dead letters (dlq.OperationStore). An operation's set
// is written when it starts (INSERT ... SELECT of the search's branches),
// numbered oldest first; a run walks it by seq after the operation's
// position, and every page's outcomes and the position move in one
// transaction, so a restart resumes after the last page recorded.

// OpSQL is the SQL of bulk operations in one dialect.
type OpSQL struct {
	// Insert: (id, action, filter, target_topic, rate, now, uid, lease
	// owner or NULL, lease until or NULL).
	Insert string
	// ItemsOfIDs numbers the live messages among ids: (ids, operation).
	ItemsOfIDs  string
	CountIDs    string // how many of ids are live messages: (ids)
	ItemsPrefix string // INSERT INTO items (operation_id, seq, message_id), before a SELECT
	SetMatched  string // (id, matched)
	Get         string // (id)
	List        string // (limit, running only)
	Claim       string // (now, owner, lease until)
	Renew       string // (id, owner, until)
	Items       string // (id, after seq, limit)
	Failures    string // (id, limit)
	// LockProgress reads an operation's position, outcomes, ranges done,
	// lease owner ('' for none) and state, under a row lock where there
	// are row locks, whoever holds it: a page recorded by a daemon that
	// lost the operation and the end of the operation (finish, cancel)
	// then follow one another, and the end counts what that page answered
	// (foldAnswers): (id).
	LockProgress string
	// AllAnswered reads every answer recorded for an operation's items:
	// (id) -> seq, outcome, error.
	AllAnswered string
	Advance     string // (id, position, done, succeeded, failed, outcomes, now, done ranges)
	ItemFailed  string // (id, seq, outcome, error)
	Finish      string // (id, owner, state, last error, now)
	Release     string // (id, owner)
	// LockForCancel: (id, now) -> state, whether a live lease holds it.
	LockForCancel   string
	RequestCancel   string // (id, uid, now)
	CancelNow       string // (id, uid, now)
	CancelRequested string // (id)
	// ClaimIDs: (ids, now, owner, lease until, operation, the page's seqs
	// as JSON); SQLite only (see RetryDLQPage). An item with an answer
	// recorded (MarkAnswered) is not claimed.
	ClaimIDs string
	// Answered reads the answers recorded for items of a page: (operation,
	// seqs as JSON) -> seq, outcome, error. MarkAnswered records one: (operation,
	// seq, outcome, error).
	Answered, MarkAnswered string
	// LockPage locks a page's messages in id order before a store-only
	// action changes them one by one: (ids). Each change locks the
	// topic's counter rows to the end of the transaction, and a bulk
	// retry page on PostgreSQL holds its messages' row locks while its
	// broker answers and then takes those counter rows: a page that took
	// counter rows before reaching one of its messages would close a
	// cycle with it. Empty where one writer at a time makes it needless.
	LockPage string
	TopicOf  string // (message id)
	// SetStatusIf writes a dlq.StatusChange (a status without a retry due):
	// (message id, now, to, the from statuses as a list).
	SetStatusIf string
}

// OpColumns are an operation's columns, for scanOperation.
const OpColumns = `id, action, state, filter, target_topic, rate, matched, done, succeeded, failed, outcomes, position,
	created_at, updated_at, started_at, finished_at, requested_by_uid, cancel_requested_at, cancelled_by_uid,
	COALESCE(lease_owner, ''), lease_expires_at, COALESCE(last_error, ''), done_ranges`

func scanOperation(row Scanner) (*dlq.Operation, error) {
	var (
		op               dlq.Operation
		action, state    string
		outcomes         []byte
		requested, by    *int64
		filter, ranges   []byte
		leaseOwner, last string
	)
	if err := row.Scan(&op.ID, &action, &state, &filter, &op.TargetTopic, &op.Rate, &op.Matched, &op.Done, &op.Succeeded,
		&op.Failed, &outcomes, &op.Position, &op.CreatedAt, &op.UpdatedAt, &op.StartedAt, &op.FinishedAt, &requested,
		&op.CancelRequestedAt, &by, &leaseOwner, &op.LeaseExpiresAt, &last, &ranges); err != nil {
		return nil, err
	}
	op.Action, op.State, op.Filter, op.LeaseOwner, op.LastError = dlq.OperationAction(action), dlq.OperationState(state), filter, leaseOwner, last
	op.RequestedByUID, op.CancelledByUID = uint32Of(requested), uint32Of(by)
	if err := json.Unmarshal(outcomes, &op.Outcomes); err != nil {
		return nil, fmt.Errorf("read outcomes of operation %s: %w", op.ID, err)
	}
	if op.Outcomes == nil {
		op.Outcomes = map[string]int64{}
	}
	if err := json.Unmarshal(ranges, &op.DoneRanges); err != nil {
		return nil, fmt.Errorf("read the ranges done of operation %s: %w", op.ID, err)
	}
	return &op, nil
}

func uint32Of(v *int64) *uint32 {
	if v == nil {
		return nil
	}
	u := uint32(*v)
	return &u
}

func int64Of(v *uint32) *int64 {
	if v == nil {
		return nil
	}
	i := int64(*v)
	return &i
}

func idStrings(ids []uuid.UUID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}

// matchSelect is the SELECT of the live messages f matches, numbered
// oldest first, whose first column is the operation: the search's
// branches, each an index walk, unioned, or, when q holds a text filter's
// candidates, those candidates read by id and checked. op is the
// operation, added to q's arguments.
func matchSelect(q *SearchQuery, f dlq.SearchFilter, op any) string {
	f.IncludeArchived = false
	var parts []string
	for _, b := range q.branches(f) {
		parts = append(parts, "SELECT id, created_at FROM "+b.table+" WHERE "+b.where)
	}
	return "SELECT " + q.Arg(op) + q.d.IdCast + ", row_number() OVER (ORDER BY created_at, id), id FROM (" + strings.Join(parts, " UNION ALL ") + ") m"
}

// matchQuery starts the query of the messages f matches. A text filter
// (q, error) that the text index narrows to few candidates has them read
// by id and checked, as a search does: without them, every message of the
// other filters' branches (every live message, for q alone) would be
// read and its text checked, which on a million messages holds the
// operation's transaction for seconds.
func (s *Store) matchQuery(ctx context.Context, qr Querier, f dlq.SearchFilter) (*SearchQuery, error) {
	cand, err := s.textCandidates(ctx, qr, s.sql.Search, f)
	if err != nil {
		return nil, err
	}
	if s.AfterCandidates != nil {
		s.AfterCandidates()
	}
	return &SearchQuery{d: s.sql.Search, cand: cand}, nil
}

// CreateDLQOperation implements dlq.OperationStore.
func (s *Store) CreateDLQOperation(ctx context.Context, op dlq.Operation, f dlq.OperationFilter) (*dlq.Operation, error) {
	var owner *string
	if op.LeaseOwner != "" {
		owner = &op.LeaseOwner
	}
	// The text candidates and the set are read from one snapshot: a change
	// committed between them would otherwise give a set that matched the
	// filter at no moment (a message that no longer matches dropped, one
	// that came to match missed as no candidate). The transaction writes
	// only the operation's own new rows.
	err := s.conn.SnapshotTx(ctx, func(q Querier) error {
		if _, err := q.Exec(ctx, s.sql.Ops.Insert, op.ID, string(op.Action), string(op.Filter), op.TargetTopic, op.Rate,
			op.CreatedAt, int64Of(op.RequestedByUID), owner, op.LeaseExpiresAt); err != nil {
			return fmt.Errorf("store bulk operation: %w", err)
		}
		var n int64
		if f.IDs != nil {
			var err error
			if n, err = q.Exec(ctx, s.sql.Ops.ItemsOfIDs, s.sql.DLQ.List(idStrings(f.IDs)), op.ID); err != nil {
				return fmt.Errorf("fix the set of bulk operation: %w", err)
			}
		} else {
			sq, err := s.matchQuery(ctx, q, f.Search)
			if err != nil {
				return err
			}
			if n, err = q.Exec(ctx, s.sql.Ops.ItemsPrefix+matchSelect(sq, f.Search, op.ID), sq.args...); err != nil {
				return fmt.Errorf("fix the set of bulk operation: %w", err)
			}
		}
		_, err := q.Exec(ctx, s.sql.Ops.SetMatched, op.ID, n)
		return err
	})
	if err != nil {
		return nil, err
	}
	return s.GetDLQOperation(ctx, op.ID)
}

// CountDLQOperation implements dlq.OperationStore.
func (s *Store) CountDLQOperation(ctx context.Context, f dlq.OperationFilter, sample int) (int64, []dlq.Message, error) {
	var (
		n    int64
		msgs []dlq.Message
	)
	err := s.conn.Snapshot(ctx, func(qr Querier) error {
		if f.IDs != nil {
			ids := idStrings(f.IDs)
			if err := qr.QueryRow(ctx, s.sql.Ops.CountIDs, s.sql.DLQ.List(ids)).Scan(&n); err != nil {
				return fmt.Errorf("count dead letters: %w", err)
			}
			for _, id := range f.IDs[:min(sample, len(f.IDs))] {
				m, err := oneMessage(qr.QueryRow(ctx, s.sql.DLQ.Get, id))
				if errors.Is(err, derrors.ErrNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				msgs = append(msgs, *m)
			}
			return nil
		}
		sq, err := s.matchQuery(ctx, qr, f.Search)
		if err != nil {
			return err
		}
		sel := matchSelect(sq, f.Search, uuid.Nil)
		if err := qr.QueryRow(ctx, "SELECT count(*) FROM ("+sel+") t", sq.args...).Scan(&n); err != nil {
			return fmt.Errorf("count dead letters: %w", err)
		}
		return nil
	})
	if err != nil || f.IDs != nil || sample <= 0 || n == 0 {
		return n, msgs, err
	}
	sf := f.Search
	sf.IncludeArchived, sf.OldestFirst, sf.Limit, sf.After = false, true, sample, nil
	page, err := s.search(ctx, s.sql.Search, sf)
	return n, page.Messages, err
}

// GetDLQOperation implements dlq.OperationStore.
func (s *Store) GetDLQOperation(ctx context.Context, id uuid.UUID) (*dlq.Operation, error) {
	op, err := scanOperation(s.conn.QueryRow(ctx, s.sql.Ops.Get, id))
	if errors.Is(err, derrors.ErrNotFound) {
		return nil, fmt.Errorf("%w: bulk operation %s", derrors.ErrNotFound, id)
	}
	return op, err
}

// ListDLQOperations implements dlq.OperationStore.
func (s *Store) ListDLQOperations(ctx context.Context, limit int, runningOnly bool) ([]dlq.Operation, error) {
	ops, err := QueryAll(ctx, s.conn, func(sc Scanner) (dlq.Operation, error) {
		op, err := scanOperation(sc)
		if err != nil {
			return dlq.Operation{}, err
		}
		return *op, nil
	}, s.sql.Ops.List, limit, runningOnly)
	if err != nil {
		return nil, fmt.Errorf("list bulk operations: %w", err)
	}
	return ops, nil
}

// ClaimDLQOperation implements dlq.OperationStore.
func (s *Store) ClaimDLQOperation(ctx context.Context, owner string, now, leaseUntil time.Time) (*dlq.Operation, error) {
	op, err := scanOperation(s.conn.QueryRow(ctx, s.sql.Ops.Claim, now, owner, leaseUntil))
	if errors.Is(err, derrors.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim bulk operation: %w", err)
	}
	return op, nil
}

// RenewDLQOperationLease implements dlq.OperationStore.
func (s *Store) RenewDLQOperationLease(ctx context.Context, id uuid.UUID, owner string, until time.Time) error {
	return s.heldChange(ctx, "renew bulk operation lease", s.sql.Ops.Renew, id, owner, until)
}

// notHeld is the derrors.ErrLeaseLost of an operation owner no longer holds.
func notHeld(id uuid.UUID, owner string) error {
	return fmt.Errorf("%w: bulk operation %s is no longer held by %s", derrors.ErrLeaseLost, id, owner)
}

// heldChange runs a statement on an operation that owner must hold.
func (s *Store) heldChange(ctx context.Context, what, sql string, id uuid.UUID, owner string, args ...any) error {
	n, err := s.conn.Exec(ctx, sql, append([]any{id, owner}, args...)...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n == 0 {
		return notHeld(id, owner)
	}
	return nil
}

// DLQOperationItems implements dlq.OperationStore.
func (s *Store) DLQOperationItems(ctx context.Context, id uuid.UUID, after int64, limit int) ([]dlq.OperationItem, error) {
	items, err := QueryAll(ctx, s.conn, func(sc Scanner) (it dlq.OperationItem, err error) {
		err = sc.Scan(&it.Seq, &it.ID)
		return it, err
	}, s.sql.Ops.Items, id, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read bulk operation items: %w", err)
	}
	return items, nil
}

// DLQOperationFailures implements dlq.OperationStore.
func (s *Store) DLQOperationFailures(ctx context.Context, id uuid.UUID, limit int) ([]dlq.ItemResult, error) {
	out, err := QueryAll(ctx, s.conn, func(sc Scanner) (r dlq.ItemResult, err error) {
		err = sc.Scan(&r.Seq, &r.ID, &r.Outcome, &r.Error)
		return r, err
	}, s.sql.Ops.Failures, id, limit)
	if err != nil {
		return nil, fmt.Errorf("read bulk operation failures: %w", err)
	}
	return out, nil
}

// FinishDLQOperation implements dlq.OperationStore.
func (s *Store) FinishDLQOperation(ctx context.Context, id uuid.UUID, owner string, state dlq.OperationState, lastError string, now time.Time) error {
	return s.conn.Tx(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, s.sql.Ops.Finish, id, owner, string(state), lastError, now)
		if err != nil {
			return fmt.Errorf("finish bulk operation: %w", err)
		}
		if n == 0 {
			return notHeld(id, owner)
		}
		return s.foldAnswers(ctx, q, id, now)
	})
}

// ReleaseDLQOperation implements dlq.OperationStore.
func (s *Store) ReleaseDLQOperation(ctx context.Context, id uuid.UUID, owner string) error {
	return s.heldChange(ctx, "hand back bulk operation", s.sql.Ops.Release, id, owner)
}

// CancelDLQOperation implements dlq.OperationStore.
func (s *Store) CancelDLQOperation(ctx context.Context, id uuid.UUID, uid *uint32, now time.Time) (*dlq.Operation, error) {
	err := s.conn.Tx(ctx, func(q Querier) error {
		var (
			state string
			held  bool
		)
		err := q.QueryRow(ctx, s.sql.Ops.LockForCancel, id, now).Scan(&state, &held)
		if errors.Is(err, derrors.ErrNotFound) {
			return fmt.Errorf("%w: bulk operation %s", derrors.ErrNotFound, id)
		}
		if err != nil {
			return fmt.Errorf("read bulk operation: %w", err)
		}
		if dlq.OperationState(state) != dlq.OperationRunning {
			return fmt.Errorf("%w: bulk operation %s is %s already", derrors.ErrConflict, id, state)
		}
		if held {
			_, err = q.Exec(ctx, s.sql.Ops.RequestCancel, id, int64Of(uid), now)
			return err
		}
		if _, err = q.Exec(ctx, s.sql.Ops.CancelNow, id, int64Of(uid), now); err != nil {
			return err
		}
		return s.foldAnswers(ctx, q, id, now)
	})
	if err != nil {
		return nil, err
	}
	return s.GetDLQOperation(ctx, id)
}

// DLQOperationCancelRequested implements dlq.OperationStore.
func (s *Store) DLQOperationCancelRequested(ctx context.Context, id uuid.UUID) (bool, error) {
	var v bool
	if err := s.conn.QueryRow(ctx, s.sql.Ops.CancelRequested, id).Scan(&v); err != nil {
		return false, fmt.Errorf("read bulk operation: %w", err)
	}
	return v, nil
}
