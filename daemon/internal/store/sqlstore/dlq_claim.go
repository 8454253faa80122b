package sqlstore

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

// Retryable is dlq.State.Retryable in SQL, the same in both dialects: the
// one predicate of every claim and of the retry-all dry run. A claim adds
// the lease to it: a PENDING message is free, a RETRYING one only once its
// lease ran out, and only ClaimDLQ takes those (the other claims wait for
// ReleaseExpiredDLQLeases).
const Retryable = `status IN ('PENDING', 'RETRYING') AND retry_count < max_retries AND original_topic <> ''`

// Released is the status dlq.State.Next gives a RETRYING message on
// EventReleased, in SQL for the release of expired leases: PENDING, or DEAD
// when returns counted during the claim used up its attempts.
const Released = `CASE WHEN retry_count < max_retries THEN 'PENDING' ELSE 'DEAD' END`

// ClaimSQL is the SQL of claims and what ends them, in one dialect.
type ClaimSQL struct {
	// Every claim and renewal also takes, last, the wall clock when the
	// store was entered: the lease it writes starts when it is written
	// (sqliteLeaseEnd).
	Claim string // one message: (id, now, owner, lease until)
	// ClaimTopic claims a page of a topic created after a cursor: (topic,
	// cursor created_at, cursor id, limit, now, owner, lease until).
	ClaimTopic     string
	CountRetryable string // what ClaimTopic would take from the start: (topic)
	// ClaimDue: PENDING messages due for a retry, but for paused topics:
	// (now, limit, owner, lease until, sources, topics to skip).
	ClaimDue string
	// ReleaseExpired: EventReleased for leases that ran out, but for what
	// one daemon is still sending (dlq.Sending): (now, owner, ids, a list).
	// A claim of a single message or of a bulk page takes a RETRYING one
	// whose lease ran out only from another daemon.
	ReleaseExpired string
	// Renew extends the lease of messages still under a claim: (ids, a
	// list; owner; the claim's time; lease until).
	Renew string
	// ClaimedRead reads what FinishDLQ needs of messages (ClaimedColumns),
	// in id order, under row locks where the dialect has them: (ids, a list).
	ClaimedRead string
	// Revive: (id, max_retries, next_retry_at, now, attempt, to status, to
	// retry_count, from status).
	Revive string
}

// ClaimDLQ implements dlq.Store.
func (s *Store) ClaimDLQ(ctx context.Context, id uuid.UUID, c dlq.Claim) (*dlq.Message, error) {
	return s.changeOne(ctx, "claim dead letter", func(cur *dlq.Message) error { return dlq.NotRetryable(cur) },
		s.sql.DLQ.Claim, id, c.Now, c.Owner, c.LeaseUntil, time.Now())
}

// changeOne runs a statement that changes the message whose id is its
// first argument and returns it. When it changed none, the message as it
// is now says why (refused), or its absence does (derrors.ErrNotFound).
func (s *Store) changeOne(ctx context.Context, what string, refused func(cur *dlq.Message) error, sql string, id uuid.UUID, args ...any) (*dlq.Message, error) {
	m, err := oneMessage(s.conn.QueryRow(ctx, sql, append([]any{id}, args...)...))
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

// ClaimTopic is ClaimDLQTopic for a caller that entered the store at
// entered (the lease starts when it is written: sqliteLeaseEnd).
func (s *Store) ClaimTopic(ctx context.Context, topic string, after *dlq.Cursor, limit int, c dlq.Claim, entered time.Time) ([]dlq.Message, error) {
	var afterT time.Time // before every message
	afterID := uuid.Nil
	if after != nil {
		afterT, afterID = after.CreatedAt, after.ID
	}
	msgs, err := QueryAll(ctx, s.conn, ScanMessage, s.sql.DLQ.ClaimTopic, topic, afterT, afterID, limit, c.Now, c.Owner, c.LeaseUntil, entered)
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
func (s *Store) CountRetryableDLQTopic(ctx context.Context, topic string) (int64, error) {
	var n int64
	if err := s.conn.QueryRow(ctx, s.sql.DLQ.CountRetryable, topic).Scan(&n); err != nil {
		return 0, fmt.Errorf("count retryable: %w", err)
	}
	return n, nil
}

// ClaimDueDLQ implements dlq.Store.
func (s *Store) ClaimDueDLQ(ctx context.Context, limit int, c dlq.Claim) ([]dlq.Message, error) {
	msgs, err := QueryAll(ctx, s.conn, ScanMessage, s.sql.DLQ.ClaimDue, c.Now, limit, c.Owner, c.LeaseUntil, s.sql.DLQ.List(c.Sources),
		s.sql.DLQ.List(c.SkipTopics), time.Now())
	if err != nil {
		return nil, fmt.Errorf("claim due retries: %w", err)
	}
	return msgs, nil
}

// RenewDLQClaims implements dlq.Store. Only the lease changes: no trigger
// of the counts, the history or the search index looks at it.
func (s *Store) RenewDLQClaims(ctx context.Context, ids []uuid.UUID, c dlq.Claim) (int64, error) {
	n, err := s.conn.Exec(ctx, s.sql.DLQ.Renew, s.sql.DLQ.List(idStrings(ids)), c.Owner, c.Now, c.LeaseUntil, time.Now())
	if err != nil {
		return 0, fmt.Errorf("renew retry leases: %w", err)
	}
	return n, nil
}

// ReleaseExpiredDLQLeases implements dlq.Store.
func (s *Store) ReleaseExpiredDLQLeases(ctx context.Context, now time.Time, sending dlq.Sending) (int64, error) {
	n, err := s.conn.Exec(ctx, s.sql.DLQ.ReleaseExpired, now, sending.Owner, s.sql.DLQ.List(idStrings(sending.IDs)))
	if err != nil {
		return 0, fmt.Errorf("release expired leases: %w", err)
	}
	return n, nil
}

// ReviveDLQ implements dlq.Store: one statement moves a message in r.From
// that was kept whole to r.To and records the revive in its history.
func (s *Store) ReviveDLQ(ctx context.Context, id uuid.UUID, r dlq.Revive) (*dlq.Message, error) {
	return s.changeOne(ctx, "revive dead letter", func(cur *dlq.Message) error { return dlq.NotRevivable(cur) },
		s.sql.DLQ.Revive, id, r.To.MaxRetries, r.NextRetryAt, r.Now, attemptJSON(&r.Attempt), string(r.To.Status),
		r.To.RetryCount, string(r.From))
}

// ClaimedColumns is what FinishDLQ reads of a message before it records an
// outcome of its claim, for scanClaimed.
const ClaimedColumns = `id, status, retry_count, max_retries, original_topic, lease_owner, last_retry_at, attempt_log`

func scanClaimed(row Scanner) (uuid.UUID, dlq.Current, error) {
	var (
		id            uuid.UUID
		cur           dlq.Current
		status, topic string
		owner         *string
		attempts      []byte
	)
	if err := row.Scan(&id, &status, &cur.State.RetryCount, &cur.State.MaxRetries, &topic, &owner, &cur.ClaimedAt, &attempts); err != nil {
		return id, cur, err
	}
	cur.State.Status, cur.State.NoOriginalTopic = dlq.Status(status), topic == ""
	if owner != nil {
		cur.LeaseOwner = *owner
	}
	var err error
	if cur.Attempts, err = decodeAttempts(attempts); err != nil {
		return id, cur, fmt.Errorf("decode attempts of %s: %w", id, err)
	}
	return id, cur, nil
}

// OutcomeRow is what FinishDLQ writes for one outcome that applies: what
// dlq.Outcome.Apply decided from the row as it was read. The PostgreSQL
// store passes the rows as one JSON array (jsonb_to_recordset).
type OutcomeRow struct {
	ID          uuid.UUID       `json:"uid"`
	Status      string          `json:"to_status"`
	RetryCount  int             `json:"to_count"`
	NextRetryAt *time.Time      `json:"next"`
	LastError   *string         `json:"err"`         // nil keeps the one before
	Republished *time.Time      `json:"republished"` // nil keeps the one before
	Attempts    json.RawMessage `json:"attempts"`    // nil keeps the history as it was
	// ClaimedAt is the claim's time (last_retry_at) of an outcome whose
	// claim was a row lock and never written (PostgreSQL's RetryDLQPage);
	// nil keeps the one the claim wrote.
	ClaimedAt *time.Time `json:"claimed"`
}

// Finish decides every outcome on the messages as read (cur, by id) and
// returns the rows to write and the answer of FinishDLQ.
func Finish(owner string, now time.Time, outcomes []dlq.Outcome, cur map[uuid.UUID]dlq.Current) ([]OutcomeRow, []dlq.Recorded, error) {
	var rows []OutcomeRow
	answer := make([]dlq.Recorded, len(outcomes))
	for i, o := range outcomes {
		c, ok := cur[o.ID]
		if !ok {
			continue // deleted meanwhile
		}
		r, ok := o.Apply(owner, c)
		if !ok {
			continue
		}
		answer[i] = dlq.Recorded{Applied: true, Record: r}
		row := OutcomeRow{ID: o.ID, Status: string(r.To.Status), RetryCount: r.To.RetryCount,
			NextRetryAt: Microseconds(r.NextRetryAt), LastError: r.LastError}
		if r.Republished {
			row.Republished = Microseconds(&now)
		}
		if r.Attempts != nil {
			b, err := json.Marshal(r.Attempts)
			if err != nil {
				return nil, nil, fmt.Errorf("encode attempts of %s: %w", o.ID, err)
			}
			row.Attempts = b
		}
		// The next outcome of the same message (none in practice) sees
		// this one.
		c.State, c.LeaseOwner, c.ClaimedAt, c.Attempts = r.To, "", nil, r.Attempts
		cur[o.ID] = c
		rows = append(rows, row)
	}
	return rows, answer, nil
}

// FinishOutcomes is dlq.Store.FinishDLQ of both dialects: one transaction reads
// the messages (under row locks, in id order, on PostgreSQL) and write
// writes what each outcome's Apply decides. The messages are read as they
// are now, so a return counted during the claim is part of the decision.
//
// also, when not nil, writes in the same transaction what the answer
// leads to (a bulk operation's progress).
func (s *Store) FinishOutcomes(ctx context.Context, owner string, now time.Time, outcomes []dlq.Outcome,
	write func(q Querier, rows []OutcomeRow) error, also func(q Querier, answer []dlq.Recorded) error) ([]dlq.Recorded, error) {
	if len(outcomes) == 0 {
		return nil, nil
	}
	ids := make([]string, len(outcomes))
	for i, o := range outcomes {
		ids[i] = o.ID.String()
	}
	var answer []dlq.Recorded
	err := s.conn.Tx(ctx, func(q Querier) error {
		type claimed struct {
			id  uuid.UUID
			cur dlq.Current
		}
		read, err := QueryAll(ctx, q, func(sc Scanner) (c claimed, err error) {
			c.id, c.cur, err = scanClaimed(sc)
			return c, err
		}, s.sql.DLQ.ClaimedRead, s.sql.DLQ.List(ids))
		if err != nil {
			return fmt.Errorf("read claimed dead letters: %w", err)
		}
		cur := make(map[uuid.UUID]dlq.Current, len(read))
		for _, c := range read {
			cur[c.id] = c.cur
		}
		rows, a, err := Finish(owner, now, outcomes, cur)
		if err != nil {
			return err
		}
		answer = a
		if len(rows) > 0 {
			if err := write(q, rows); err != nil {
				return err
			}
		}
		if also != nil {
			return also(q, answer)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record retry outcomes: %w", err)
	}
	return answer, nil
}

// Microseconds is t as both stores keep it: JSON would carry nanoseconds,
// which PostgreSQL rounds where its binary protocol truncates.
func Microseconds(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.Truncate(time.Microsecond)
	return &u
}
