package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// retryable is dlq.State.Retryable in SQL, the same in both dialects: the
// one predicate of every claim and of the retry-all dry run. A claim adds
// the lease to it: a PENDING message is free, a RETRYING one only once its
// lease ran out, and only ClaimDLQ takes those (the other claims wait for
// ReleaseExpiredDLQLeases).
const retryable = `status IN ('PENDING', 'RETRYING') AND retry_count < max_retries`

// claimSQL is the SQL of claims and what ends them, in one dialect.
type claimSQL struct {
	claim string // one message: (id, now, owner, lease until)
	// claimTopic claims a page of a topic created after a cursor: (topic,
	// cursor created_at, cursor id, limit, now, owner, lease until).
	claimTopic     string
	countRetryable string // what claimTopic would take from the start: (topic)
	claimDue       string // PENDING messages due for a retry: (now, limit, owner, lease until)
	releaseExpired string // EventReleased for leases that ran out: (now)
	// revive: (id, max_retries, next_retry_at, now, attempt, to status, to
	// retry_count, from status).
	revive string
}

// ClaimDLQ implements dlq.Store.
func (s *sqlStore) ClaimDLQ(ctx context.Context, id uuid.UUID, c dlq.Claim) (*dlq.Message, error) {
	return s.changeOne(ctx, "claim dead letter", func(cur *dlq.Message) error {
		if cur.Status == dlq.StatusRetrying && cur.IsRetryable() {
			return &dlq.NotRetryableError{Message: cur, Reason: fmt.Sprintf("message is being retried: status=%s, retry_count=%d/%d",
				cur.Status, cur.RetryCount, cur.MaxRetries)}
		}
		return &dlq.NotRetryableError{Message: cur, Reason: cur.NotRetryableReason()}
	}, s.sql.dlq.claim, id, c.Now, c.Owner, c.LeaseUntil)
}

// changeOne runs a statement that changes the message whose id is its
// first argument and returns it. When it changed none, the message as it
// is now says why (refused), or its absence does (derrors.ErrNotFound).
func (s *sqlStore) changeOne(ctx context.Context, what string, refused func(cur *dlq.Message) error, sql string, id uuid.UUID, args ...any) (*dlq.Message, error) {
	m, err := oneMessage(s.db.queryRow(ctx, sql, append([]any{id}, args...)...))
	if err == nil {
		return m, nil
	}
	if !errors.Is(err, derrors.ErrNotFound) {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	cur, err := s.GetDLQ(ctx, id)
	if err != nil {
		return nil, err
	}
	return nil, refused(cur)
}

// ClaimDLQTopic implements dlq.Store.
func (s *sqlStore) ClaimDLQTopic(ctx context.Context, topic string, after *dlq.Cursor, limit int, c dlq.Claim) ([]dlq.Message, error) {
	var afterT time.Time // before every message
	afterID := uuid.Nil
	if after != nil {
		afterT, afterID = after.CreatedAt, after.ID
	}
	msgs, err := queryAll(ctx, s.db, scanMessage, s.sql.dlq.claimTopic, topic, afterT, afterID, limit, c.Now, c.Owner, c.LeaseUntil)
	if err != nil {
		return nil, fmt.Errorf("claim topic: %w", err)
	}
	sort.Slice(msgs, func(i, j int) bool {
		if !msgs[i].CreatedAt.Equal(msgs[j].CreatedAt) {
			return msgs[i].CreatedAt.Before(msgs[j].CreatedAt)
		}
		return msgs[i].ID.String() < msgs[j].ID.String()
	})
	return msgs, nil
}

// CountRetryableDLQTopic implements dlq.Store with ClaimDLQTopic's predicate.
func (s *sqlStore) CountRetryableDLQTopic(ctx context.Context, topic string) (int64, error) {
	var n int64
	if err := s.db.queryRow(ctx, s.sql.dlq.countRetryable, topic).Scan(&n); err != nil {
		return 0, fmt.Errorf("count retryable: %w", err)
	}
	return n, nil
}

// ClaimDueDLQ implements dlq.Store.
func (s *sqlStore) ClaimDueDLQ(ctx context.Context, limit int, c dlq.Claim) ([]dlq.Message, error) {
	msgs, err := queryAll(ctx, s.db, scanMessage, s.sql.dlq.claimDue, c.Now, limit, c.Owner, c.LeaseUntil)
	if err != nil {
		return nil, fmt.Errorf("claim due retries: %w", err)
	}
	return msgs, nil
}

// ReleaseExpiredDLQLeases implements dlq.Store.
func (s *sqlStore) ReleaseExpiredDLQLeases(ctx context.Context, now time.Time) (int64, error) {
	n, err := s.db.exec(ctx, s.sql.dlq.releaseExpired, now)
	if err != nil {
		return 0, fmt.Errorf("release expired leases: %w", err)
	}
	return n, nil
}

// ReviveDLQ implements dlq.Store: one statement moves a message in r.From
// that was kept whole to r.To and records the revive in its history.
func (s *sqlStore) ReviveDLQ(ctx context.Context, id uuid.UUID, r dlq.Revive) (*dlq.Message, error) {
	return s.changeOne(ctx, "revive dead letter", func(cur *dlq.Message) error { return dlq.NotRevivable(cur) },
		s.sql.dlq.revive, id, r.To.MaxRetries, r.NextRetryAt, r.Now, attemptJSON(&r.Attempt), string(r.To.Status),
		r.To.RetryCount, string(r.From))
}

// outcomeRow is what FinishDLQ writes for one outcome: dlq.Finish decided
// it from the row as it was claimed, and the store applies it only to a row
// that still is in that status and count under the owner's lease. The
// PostgreSQL store passes the rows as one JSON array (jsonb_to_recordset).
type outcomeRow struct {
	ID          uuid.UUID       `json:"uid"`
	Status      string          `json:"to_status"`
	RetryCount  int             `json:"to_count"`
	NextRetryAt *time.Time      `json:"next"`
	LastError   *string         `json:"err"`         // nil keeps the one before
	Republished *time.Time      `json:"republished"` // nil keeps the one before
	Attempt     json.RawMessage `json:"entry"`       // nil adds no history entry
	FromStatus  string          `json:"from_status"`
	FromCount   int             `json:"from_count"`
}

func outcomeRows(now time.Time, outcomes []dlq.Outcome) []outcomeRow {
	out := make([]outcomeRow, len(outcomes))
	for i, o := range outcomes {
		out[i] = outcomeRow{ID: o.ID, Status: string(o.To.Status), RetryCount: o.To.RetryCount,
			NextRetryAt: microseconds(o.NextRetryAt), LastError: o.LastError(), FromStatus: string(o.From.Status),
			FromCount: o.From.RetryCount}
		if o.Republished() {
			out[i].Republished = microseconds(&now)
		}
		if a := attemptJSON(o.Attempt); a != nil {
			out[i].Attempt = json.RawMessage(*a)
		}
	}
	return out
}

// microseconds is t as both stores keep it: JSON would carry nanoseconds,
// which PostgreSQL rounds where its binary protocol truncates.
func microseconds(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.Truncate(time.Microsecond)
	return &u
}
