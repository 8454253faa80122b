package sqlstore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// DLQSQL is the SQL of dlq.Store in one dialect (postgres/dlq.go,
// sqlite/dlq.go), beside the intake and the outcomes, whose SQL differs
// too much to share the Go around it.
type DLQSQL struct {
	Get    string // (id)
	Delete string // (id)
	// Topics summarises every DLQ topic: (dlq_topic, status, count, oldest PENDING created_at).
	Topics string
	// ListPage is a page of a topic, newest first: (topic, page size,
	// offset, offset + page size, status or ""); ListCount its total:
	// (topic, status or "").
	ListPage, ListCount string
	// Known reports whether a position was seen with a digest, as a stored
	// dead letter (live or archived) or as a return applied: (source, topic,
	// position, digest). An empty digest on either side matches
	// any (rows from before digests, a caller that has none).
	Known string
	// RecordReturn records a return applied, unless it was: (source, topic,
	// position, digest, message id, now); one row or none.
	RecordReturn string
	// Returned applies a returning replay: (id, status, retry_count,
	// error_message, next_retry_at, now, last_error, attempt). A message
	// that stays RETRYING keeps its lease.
	Returned string
	// PendingSources lists the sources that have PENDING messages;
	// PendingOfSource counts one source's by DLQ topic: (source).
	PendingSources, PendingOfSource string
	// List passes a list of strings as one parameter.
	List func([]string) any
	ClaimSQL
	Unacked UnackedSQL
}

// DLQInsertColumns are the columns intake writes for a new dead letter, in
// the order both dialects' statements give them.
const DLQInsertColumns = `id, original_topic, error_message, retry_count, max_retries, payload, status, created_at,
	updated_at, source, dlq_topic, source_position, position_display, message_key, headers, raw_payload, produced_at,
	next_retry_at, last_error, attempt_log, content_digest, failure_group, truncated, error_class, failed_attempts,
	first_failed_at, origin_from, origin_configured`

// ReturnColumns are the columns of a recorded return (dlq_returns).
const ReturnColumns = `source, dlq_topic, source_position, content_digest, message_id, applied_at`

// noDigest is the digest of a position whose content is not known (stored
// before digests): it matches any.
var noDigest = []byte{}

// DigestOf is in's digest as the store keeps it.
func DigestOf(in dlq.Incoming) []byte {
	if in.Digest == nil {
		return noDigest
	}
	return in.Digest
}

// DLQColumns is what every statement that returns dead letters selects,
// for ScanMessage; the same list in both dialects.
const DLQColumns = `id, original_topic, error_message, retry_count, max_retries, status, created_at, updated_at,
	last_retry_at, source, dlq_topic, source_position, position_display, message_key, headers, raw_payload,
	produced_at, next_retry_at, last_error, attempt_log, republished_at, raw_payload IS NULL, message_key IS NULL, failure_group, truncated,
	error_class, failed_attempts, first_failed_at, origin_from, origin_configured`

func ScanMessage(row Scanner) (dlq.Message, error) {
	var (
		m                    dlq.Message
		status               string
		headers, attempts    []byte
		lastError            *string
		payloadNull, keyNull bool
	)
	err := row.Scan(&m.ID, &m.OriginalTopic, &m.ErrorMessage, &m.RetryCount, &m.MaxRetries, &status,
		&m.CreatedAt, &m.UpdatedAt, &m.LastRetryAt, &m.Position.Source, &m.Position.Topic,
		&m.Position.ID, &m.Position.Display, &m.Key, &headers, &m.Payload, &m.ProducedAt, &m.NextRetryAt,
		&lastError, &attempts, &m.RepublishedAt, &payloadNull, &keyNull, &m.Group, &m.Truncated,
		&m.Origin.ErrorClass, &m.Origin.Attempts, &m.Origin.FirstFailedAt, &m.Origin.From, &m.Origin.Configured)
	if err != nil {
		return m, err
	}
	m.Status = dlq.Status(status)
	if m.Headers, err = decodeHeaders(headers); err != nil {
		return m, fmt.Errorf("decode headers of %s: %w", m.ID, err)
	}
	if m.Attempts, err = decodeAttempts(attempts); err != nil {
		return m, fmt.Errorf("decode attempts of %s: %w", m.ID, err)
	}
	if lastError != nil {
		m.LastError = *lastError
	}
	// A driver may read an empty BLOB as nil: only a NULL is a null value
	// (a tombstone, or one not kept: Truncated) or a null key.
	if payloadNull {
		m.Payload = nil
	} else if m.Payload == nil {
		m.Payload = []byte{}
	}
	if !keyNull && m.Key == nil {
		m.Key = []byte{}
	}
	return m, nil
}

// oneMessage reads the message a statement returns.
func oneMessage(row Scanner) (*dlq.Message, error) {
	m, err := ScanMessage(row)
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// GetDLQ implements dlq.Store.
func (s *Store) GetDLQ(ctx context.Context, id uuid.UUID) (*dlq.Message, error) {
	m, err := oneMessage(s.conn.QueryRow(ctx, s.sql.DLQ.Get, id))
	if err != nil {
		return nil, fmt.Errorf("dlq message %s: %w", id, err)
	}
	return m, nil
}

// ListDLQ implements dlq.Store: the page and the total (from the per-topic
// counts) are read from one snapshot, so that they agree.
func (s *Store) ListDLQ(ctx context.Context, f dlq.ListFilter) ([]dlq.Message, int64, error) {
	offset := (f.Page - 1) * f.PageSize
	var (
		msgs  []dlq.Message
		total int64
	)
	err := s.conn.Snapshot(ctx, func(q Querier) error {
		var err error
		msgs, err = QueryAll(ctx, q, ScanMessage, s.sql.DLQ.ListPage, f.Topic, f.PageSize, offset, offset+f.PageSize, string(f.Status))
		if err != nil {
			return fmt.Errorf("list dead letters: %w", err)
		}
		if err := q.QueryRow(ctx, s.sql.DLQ.ListCount, f.Topic, string(f.Status)).Scan(&total); err != nil {
			return fmt.Errorf("count dead letters: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return msgs, total, nil
}

// DeleteDLQ implements dlq.Store.
func (s *Store) DeleteDLQ(ctx context.Context, id uuid.UUID) error {
	n, err := s.conn.Exec(ctx, s.sql.DLQ.Delete, id)
	if err != nil {
		return fmt.Errorf("delete dead letter: %w", err)
	}
	return foundOne(n, "dlq message %s", id)
}

// DLQTopics implements dlq.Store.
func (s *Store) DLQTopics(ctx context.Context) ([]dlq.TopicSummary, error) {
	type row struct {
		topic, status string
		n             int64
		oldest        *time.Time
	}
	rows, err := QueryAll(ctx, s.conn, func(sc Scanner) (r row, err error) {
		return r, sc.Scan(&r.topic, &r.status, &r.n, &r.oldest)
	}, s.sql.DLQ.Topics)
	if err != nil {
		return nil, fmt.Errorf("summarise topics: %w", err)
	}
	var out []dlq.TopicSummary
	index := map[string]int{}
	for _, r := range rows {
		i, ok := index[r.topic]
		if !ok {
			i = len(out)
			index[r.topic] = i
			counts := map[dlq.Status]int64{}
			for _, s := range dlq.Statuses {
				counts[s] = 0
			}
			out = append(out, dlq.TopicSummary{Topic: r.topic, Counts: counts})
		}
		out[i].Counts[dlq.Status(r.status)] += r.n
		if r.oldest != nil {
			t := r.oldest.UTC()
			out[i].OldestPendingAt = &t
		}
	}
	return out, nil
}

// Ingest runs the intake of a batch in one transaction: the redeliveries
// of per-delivery sources that match an unconfirmed delivery are taken
// out (takeRedeliveries), fn, the dialect's part, stores the rest and
// counts into res, and the per-delivery messages stored are recorded as
// unconfirmed until their Commit succeeds.
func (s *Store) Ingest(ctx context.Context, batch []dlq.Incoming, now time.Time,
	fn func(q Querier, batch []dlq.Incoming, res *dlq.IngestResult) error) (dlq.IngestResult, error) {
	var res dlq.IngestResult
	if len(batch) == 0 {
		return res, nil
	}
	err := s.conn.Tx(ctx, func(q Querier) error {
		res = dlq.IngestResult{}
		rest, err := s.takeRedeliveries(ctx, q, batch, now, &res)
		if err != nil || len(rest) == 0 {
			return err
		}
		if err := fn(q, rest, &res); err != nil {
			return err
		}
		return s.keepDeliveries(ctx, q, rest, now)
	})
	return res, err
}

// statusOf is the status a new message is stored with.
func statusOf(in dlq.Incoming) string {
	if in.Dead {
		return string(dlq.StatusDead)
	}
	return string(dlq.StatusPending)
}

// firstRetry is a new message's first automatic retry: none when it is
// stored DEAD or automatic retries are off.
func firstRetry(in dlq.Incoming, opts dlq.IngestOptions) *time.Time {
	if in.Dead || opts.FirstRetryAt == nil {
		return nil
	}
	return opts.FirstRetryAt()
}

// FeedbackOf is the record a returning replay names (x-dlq-id); uuid.Nil,
// which names none, for a message that is not one.
func feedbackOf(in dlq.Incoming) uuid.UUID {
	if in.FeedbackOf == nil {
		return uuid.Nil
	}
	return *in.FeedbackOf
}

// ReplayColumns is what intake reads of the record that a returning replay
// names (x-dlq-id), for ScanReplayTarget.
const ReplayColumns = `id, status, retry_count, max_retries, source, dlq_topic, republished_at, raw_payload, raw_payload IS NULL, truncated`

type ReplayTarget struct {
	ID               uuid.UUID
	State            dlq.State
	Source, DlqTopic string
	RepublishedAt    *time.Time
	Payload          []byte // nil for a null value or one not kept
	Truncated        bool
}

func ScanReplayTarget(row Scanner) (*ReplayTarget, error) {
	var (
		r      ReplayTarget
		status string
		null   bool
	)
	if err := row.Scan(&r.ID, &status, &r.State.RetryCount, &r.State.MaxRetries, &r.Source, &r.DlqTopic,
		&r.RepublishedAt, &r.Payload, &null, &r.Truncated); err != nil {
		return nil, err
	}
	r.State.Status = dlq.Status(status)
	if null {
		r.Payload = nil
	} else if r.Payload == nil {
		r.Payload = []byte{}
	}
	return &r, nil
}

// ours reports whether in is a replay of r that failed again and came
// back: the broker acknowledged a republish of r, and in came back on the
// source and DLQ topic r was read from, with the very value bytes that
// were republished (a null value is not an empty one). A header copied onto
// another dead letter (Kafka Streams and many frameworks propagate headers)
// fails it.
func (r *ReplayTarget) ours(in dlq.Incoming) bool {
	return r.RepublishedAt != nil && in.Position.Source == r.Source && in.Position.Topic == r.DlqTopic &&
		!r.Truncated && !in.Truncated && (r.Payload == nil) == (in.Payload == nil) && bytes.Equal(r.Payload, in.Payload)
}

// TakeReturn handles in, a message with an x-dlq-id, given r, the record it
// names (nil when there is none); false when in is a new dead letter to be
// inserted. A position already known (a stored dead letter, live or
// archived, or a return applied) is a redelivery and changes nothing: the
// rules are not asked again, so reading a DLQ topic twice never applies a
// return twice, whatever changed in between. Otherwise, a replay of r
// (ours) is recorded and applied with the status machine.
func (s *Store) TakeReturn(ctx context.Context, q Querier, in dlq.Incoming, r *ReplayTarget, opts dlq.IngestOptions, res *dlq.IngestResult) (bool, error) {
	pos, digest := in.Position, DigestOf(in)
	var known bool
	if err := q.QueryRow(ctx, s.sql.DLQ.Known, pos.Source, pos.Topic, pos.ID, digest).Scan(&known); err != nil {
		return false, fmt.Errorf("look up a returned replay's position: %w", err)
	}
	if known {
		res.Duplicates++
		return true, nil
	}
	if r == nil || !r.ours(in) {
		return false, nil
	}
	n, err := q.Exec(ctx, s.sql.DLQ.RecordReturn, pos.Source, pos.Topic, pos.ID, digest, r.ID, opts.Now)
	if err != nil {
		return false, fmt.Errorf("record a returned replay: %w", err)
	}
	if n == 0 {
		res.Duplicates++ // recorded by a concurrent intake of the same position
		return true, nil
	}
	if in.FeedbackAttempt > 0 && in.FeedbackAttempt != r.State.RetryCount+1 {
		// Not the return of the latest attempt, which is the one not yet
		// counted: the same failure written twice by the consumer, or a
		// late copy of an earlier one. Its position is recorded, so that
		// it is known when read again.
		res.Duplicates++
		return true, nil
	}
	to, _ := r.State.Next(dlq.EventReturned)
	var next *time.Time
	if to.Status == dlq.StatusPending && opts.FeedbackRetryAt != nil {
		next = opts.FeedbackRetryAt(to.RetryCount)
	}
	reason := fmt.Sprintf("the replay failed again and came back to %s (at %s): %s",
		pos.Topic, pos.Display, in.ErrorMessage)
	entry := &dlq.Attempt{At: opts.Now, Outcome: dlq.OutcomeReturned, Error: reason}
	if _, err := q.Exec(ctx, s.sql.DLQ.Returned, r.ID, string(to.Status), to.RetryCount, in.ErrorMessage, next,
		opts.Now, reason, attemptJSON(entry)); err != nil {
		return false, fmt.Errorf("update replayed dead letter: %w", err)
	}
	r.State = to
	res.Feedback++
	if to.Status == dlq.StatusDead {
		res.Dead++
	}
	return true, nil
}

// PendingBySourceDLQ implements dlq.Store: the sources with PENDING
// messages come from the due index one probe each, and only those not
// configured are counted.
func (s *Store) PendingBySourceDLQ(ctx context.Context, configured []string) ([]dlq.SourcePending, error) {
	sources, err := QueryAll(ctx, s.conn, func(sc Scanner) (src string, err error) { return src, sc.Scan(&src) }, s.sql.DLQ.PendingSources)
	if err != nil {
		return nil, fmt.Errorf("list sources with pending dead letters: %w", err)
	}
	var out []dlq.SourcePending
	for _, src := range sources {
		if slices.Contains(configured, src) {
			continue
		}
		counts, err := QueryAll(ctx, s.conn, func(sc Scanner) (p dlq.SourcePending, err error) {
			p.Source = src
			return p, sc.Scan(&p.Topic, &p.Pending)
		}, s.sql.DLQ.PendingOfSource, src)
		if err != nil {
			return nil, fmt.Errorf("count pending dead letters of source %s: %w", src, err)
		}
		out = append(out, counts...)
	}
	return out, nil
}

// NewRow is a new dead letter as intake stores it, the same in both
// dialects but for the payload's JSON copy.
type NewRow struct {
	ID          uuid.UUID
	Status      string
	NextRetryAt *time.Time
	LastError   *string
	Headers     string
	Attempts    string
	Group       dlq.Group
}

func NewRowOf(in dlq.Incoming, opts dlq.IngestOptions) NewRow {
	r := NewRow{ID: newID(), Status: statusOf(in), NextRetryAt: firstRetry(in, opts), Headers: headersJSON(in.Headers),
		Attempts: attemptLog(in.Attempt), Group: dlq.FailureGroup(in.OriginalTopic, in.Origin.ErrorClass, in.ErrorMessage)}
	if in.LastError != "" {
		r.LastError = &in.LastError
	}
	return r
}
