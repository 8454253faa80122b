package store

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// dlqSQL is the SQL of dlq.Store in one dialect (postgres_dlq.go,
// sqlite_dlq.go), beside the intake and the outcomes, whose SQL differs
// too much to share the Go around it.
type dlqSQL struct {
	get    string // (id)
	delete string // (id)
	// topics summarises every DLQ topic: (dlq_topic, status, count, oldest PENDING created_at).
	topics string
	// listPage is a page of a topic, newest first: (topic, page size,
	// offset, offset + page size, status or ""); listCount its total:
	// (topic, status or "").
	listPage, listCount string
	// known reports whether a position was seen with a digest, as a stored
	// dead letter (live or archived) or as a return applied: (source, topic,
	// partition, offset, digest). An empty digest on either side matches
	// any (rows from before digests, a caller that has none).
	known string
	// recordReturn records a return applied, unless it was: (source, topic,
	// partition, offset, digest, message id, now); one row or none.
	recordReturn string
	// returned applies a returning replay: (id, status, retry_count,
	// error_message, next_retry_at, now, last_error, attempt). A message
	// that stays RETRYING keeps its lease.
	returned string
	// pendingSources lists the sources that have PENDING messages;
	// pendingOfSource counts one source's by DLQ topic: (source).
	pendingSources, pendingOfSource string
	// list passes a list of strings as one parameter.
	list func([]string) any
	claimSQL
}

// dlqInsertColumns are the columns intake writes for a new dead letter, in
// the order both dialects' statements give them.
const dlqInsertColumns = `id, original_topic, error_message, retry_count, max_retries, payload, status, created_at,
	updated_at, source, dlq_topic, source_partition, source_offset, message_key, headers, raw_payload, produced_at,
	next_retry_at, last_error, attempt_log, content_digest, failure_group, truncated`

// returnColumns are the columns of a recorded return (dlq_returns).
const returnColumns = `source, dlq_topic, source_partition, source_offset, content_digest, message_id, applied_at`

// noDigest is the digest of a position whose content is not known (stored
// before digests): it matches any.
var noDigest = []byte{}

// digestOf is in's digest as the store keeps it.
func digestOf(in dlq.Incoming) []byte {
	if in.Digest == nil {
		return noDigest
	}
	return in.Digest
}

// dlqColumns is what every statement that returns dead letters selects,
// for scanMessage; the same list in both dialects.
const dlqColumns = `id, original_topic, error_message, retry_count, max_retries, status, created_at, updated_at,
	last_retry_at, source, dlq_topic, source_partition, source_offset, message_key, headers, raw_payload,
	produced_at, next_retry_at, last_error, attempt_log, republished_at, raw_payload IS NULL, message_key IS NULL, failure_group, truncated`

func scanMessage(row scanner) (dlq.Message, error) {
	var (
		m                    dlq.Message
		status               string
		headers, attempts    []byte
		lastError            *string
		payloadNull, keyNull bool
	)
	err := row.Scan(&m.ID, &m.OriginalTopic, &m.ErrorMessage, &m.RetryCount, &m.MaxRetries, &status,
		&m.CreatedAt, &m.UpdatedAt, &m.LastRetryAt, &m.Position.Source, &m.Position.Topic,
		&m.Position.Partition, &m.Position.Offset, &m.Key, &headers, &m.Payload, &m.ProducedAt, &m.NextRetryAt,
		&lastError, &attempts, &m.RepublishedAt, &payloadNull, &keyNull, &m.Group, &m.Truncated)
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
func oneMessage(row scanner) (*dlq.Message, error) {
	m, err := scanMessage(row)
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// GetDLQ implements dlq.Store.
func (s *sqlStore) GetDLQ(ctx context.Context, id uuid.UUID) (*dlq.Message, error) {
	m, err := oneMessage(s.db.queryRow(ctx, s.sql.dlq.get, id))
	if err != nil {
		return nil, fmt.Errorf("dlq message %s: %w", id, err)
	}
	return m, nil
}

// ListDLQ implements dlq.Store: the page and the total (from the per-topic
// counts) are read from one snapshot, so that they agree.
func (s *sqlStore) ListDLQ(ctx context.Context, f dlq.ListFilter) ([]dlq.Message, int64, error) {
	offset := (f.Page - 1) * f.PageSize
	var (
		msgs  []dlq.Message
		total int64
	)
	err := s.db.snapshot(ctx, func(q querier) error {
		var err error
		msgs, err = queryAll(ctx, q, scanMessage, s.sql.dlq.listPage, f.Topic, f.PageSize, offset, offset+f.PageSize, string(f.Status))
		if err != nil {
			return fmt.Errorf("list dead letters: %w", err)
		}
		if err := q.queryRow(ctx, s.sql.dlq.listCount, f.Topic, string(f.Status)).Scan(&total); err != nil {
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
func (s *sqlStore) DeleteDLQ(ctx context.Context, id uuid.UUID) error {
	n, err := s.db.exec(ctx, s.sql.dlq.delete, id)
	if err != nil {
		return fmt.Errorf("delete dead letter: %w", err)
	}
	return foundOne(n, "dlq message %s", id)
}

// DLQTopics implements dlq.Store.
func (s *sqlStore) DLQTopics(ctx context.Context) ([]dlq.TopicSummary, error) {
	type row struct {
		topic, status string
		n             int64
		oldest        *time.Time
	}
	rows, err := queryAll(ctx, s.db, func(sc scanner) (r row, err error) {
		return r, sc.Scan(&r.topic, &r.status, &r.n, &r.oldest)
	}, s.sql.dlq.topics)
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

// ingest runs the intake of a batch in one transaction; fn is the
// dialect's part, and counts into res.
func (s *sqlStore) ingest(ctx context.Context, batch []dlq.Incoming, fn func(q querier, res *dlq.IngestResult) error) (dlq.IngestResult, error) {
	var res dlq.IngestResult
	if len(batch) == 0 {
		return res, nil
	}
	err := s.db.tx(ctx, func(q querier) error {
		res = dlq.IngestResult{}
		return fn(q, &res)
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

// feedbackOf is the record a returning replay names (x-dlq-id); uuid.Nil,
// which names none, for a message that is not one.
func feedbackOf(in dlq.Incoming) uuid.UUID {
	if in.FeedbackOf == nil {
		return uuid.Nil
	}
	return *in.FeedbackOf
}

// replayColumns is what intake reads of the record that a returning replay
// names (x-dlq-id), for scanReplayTarget.
const replayColumns = `id, status, retry_count, max_retries, source, dlq_topic, republished_at, raw_payload, raw_payload IS NULL, truncated`

type replayTarget struct {
	id               uuid.UUID
	state            dlq.State
	source, dlqTopic string
	republishedAt    *time.Time
	payload          []byte // nil for a null value or one not kept
	truncated        bool
}

func scanReplayTarget(row scanner) (*replayTarget, error) {
	var (
		r      replayTarget
		status string
		null   bool
	)
	if err := row.Scan(&r.id, &status, &r.state.RetryCount, &r.state.MaxRetries, &r.source, &r.dlqTopic,
		&r.republishedAt, &r.payload, &null, &r.truncated); err != nil {
		return nil, err
	}
	r.state.Status = dlq.Status(status)
	if null {
		r.payload = nil
	} else if r.payload == nil {
		r.payload = []byte{}
	}
	return &r, nil
}

// ours reports whether in is a replay of r that failed again and came
// back: the broker acknowledged a republish of r, and in came back on the
// source and DLQ topic r was read from, with the very value bytes that
// were republished (a null value is not an empty one). A header copied onto
// another dead letter (Kafka Streams and many frameworks propagate headers)
// fails it.
func (r *replayTarget) ours(in dlq.Incoming) bool {
	return r.republishedAt != nil && in.Position.Source == r.source && in.Position.Topic == r.dlqTopic &&
		!r.truncated && !in.Truncated && (r.payload == nil) == (in.Payload == nil) && bytes.Equal(r.payload, in.Payload)
}

// takeReturn handles in, a message with an x-dlq-id, given r, the record it
// names (nil when there is none); false when in is a new dead letter to be
// inserted. A position already known (a stored dead letter, live or
// archived, or a return applied) is a redelivery and changes nothing: the
// rules are not asked again, so reading a DLQ topic twice never applies a
// return twice, whatever changed in between. Otherwise, a replay of r
// (ours) is recorded and applied with the status machine.
func (s *sqlStore) takeReturn(ctx context.Context, q querier, in dlq.Incoming, r *replayTarget, opts dlq.IngestOptions, res *dlq.IngestResult) (bool, error) {
	pos, digest := in.Position, digestOf(in)
	var known bool
	if err := q.queryRow(ctx, s.sql.dlq.known, pos.Source, pos.Topic, pos.Partition, pos.Offset, digest).Scan(&known); err != nil {
		return false, fmt.Errorf("look up a returned replay's position: %w", err)
	}
	if known {
		res.Duplicates++
		return true, nil
	}
	if r == nil || !r.ours(in) {
		return false, nil
	}
	n, err := q.exec(ctx, s.sql.dlq.recordReturn, pos.Source, pos.Topic, pos.Partition, pos.Offset, digest, r.id, opts.Now)
	if err != nil {
		return false, fmt.Errorf("record a returned replay: %w", err)
	}
	if n == 0 {
		res.Duplicates++ // recorded by a concurrent intake of the same position
		return true, nil
	}
	if in.FeedbackAttempt > 0 && in.FeedbackAttempt != r.state.RetryCount+1 {
		// Not the return of the latest attempt, which is the one not yet
		// counted: the same failure written twice by the consumer, or a
		// late copy of an earlier one. Its position is recorded, so that
		// it is known when read again.
		res.Duplicates++
		return true, nil
	}
	to, _ := r.state.Next(dlq.EventReturned)
	var next *time.Time
	if to.Status == dlq.StatusPending && opts.FeedbackRetryAt != nil {
		next = opts.FeedbackRetryAt(to.RetryCount)
	}
	reason := fmt.Sprintf("the replay failed again and came back to %s (partition %d, offset %d): %s",
		pos.Topic, pos.Partition, pos.Offset, in.ErrorMessage)
	entry := &dlq.Attempt{At: opts.Now, Outcome: dlq.OutcomeReturned, Error: reason}
	if _, err := q.exec(ctx, s.sql.dlq.returned, r.id, string(to.Status), to.RetryCount, in.ErrorMessage, next,
		opts.Now, reason, attemptJSON(entry)); err != nil {
		return false, fmt.Errorf("update replayed dead letter: %w", err)
	}
	r.state = to
	res.Feedback++
	if to.Status == dlq.StatusDead {
		res.Dead++
	}
	return true, nil
}

// PendingBySourceDLQ implements dlq.Store: the sources with PENDING
// messages come from the due index one probe each, and only those not
// configured are counted.
func (s *sqlStore) PendingBySourceDLQ(ctx context.Context, configured []string) ([]dlq.SourcePending, error) {
	sources, err := queryAll(ctx, s.db, func(sc scanner) (src string, err error) { return src, sc.Scan(&src) }, s.sql.dlq.pendingSources)
	if err != nil {
		return nil, fmt.Errorf("list sources with pending dead letters: %w", err)
	}
	var out []dlq.SourcePending
	for _, src := range sources {
		if slices.Contains(configured, src) {
			continue
		}
		counts, err := queryAll(ctx, s.db, func(sc scanner) (p dlq.SourcePending, err error) {
			p.Source = src
			return p, sc.Scan(&p.Topic, &p.Pending)
		}, s.sql.dlq.pendingOfSource, src)
		if err != nil {
			return nil, fmt.Errorf("count pending dead letters of source %s: %w", src, err)
		}
		out = append(out, counts...)
	}
	return out, nil
}

// newRow is a new dead letter as intake stores it, the same in both
// dialects but for the payload's JSON copy.
type newRow struct {
	id          uuid.UUID
	status      string
	nextRetryAt *time.Time
	lastError   *string
	headers     string
	attempts    string
	group       dlq.Group
}

func newRowOf(in dlq.Incoming, opts dlq.IngestOptions) newRow {
	r := newRow{id: newID(), status: statusOf(in), nextRetryAt: firstRetry(in, opts), headers: headersJSON(in.Headers),
		attempts: attemptLog(in.Attempt), group: dlq.FailureGroup(in.OriginalTopic, in.ErrorMessage, in.Headers)}
	if in.LastError != "" {
		r.lastError = &in.LastError
	}
	return r
}
