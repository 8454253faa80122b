package store

import (
	"context"
	"fmt"
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
	// returned applies a returning replay: (id, status, retry_count,
	// error_message, next_retry_at, last_feedback, now, last_error, attempt).
	returned string
	claimSQL
}

// dlqColumns is what every statement that returns dead letters selects,
// for scanMessage; the same list in both dialects.
const dlqColumns = `id, original_topic, error_message, retry_count, max_retries, status, created_at, updated_at,
	last_retry_at, source, dlq_topic, source_partition, source_offset, message_key, headers, raw_payload,
	produced_at, next_retry_at, last_error, attempt_log, republished_at, raw_payload IS NULL, message_key IS NULL`

func scanMessage(row scanner) (dlq.Message, error) {
	var (
		m                       dlq.Message
		status                  string
		headers, attempts       []byte
		lastError               *string
		payloadMissing, keyNull bool
	)
	err := row.Scan(&m.ID, &m.OriginalTopic, &m.ErrorMessage, &m.RetryCount, &m.MaxRetries, &status,
		&m.CreatedAt, &m.UpdatedAt, &m.LastRetryAt, &m.Position.Source, &m.Position.Topic,
		&m.Position.Partition, &m.Position.Offset, &m.Key, &headers, &m.Payload, &m.ProducedAt, &m.NextRetryAt,
		&lastError, &attempts, &m.RepublishedAt, &payloadMissing, &keyNull)
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
	// A driver may read an empty BLOB as nil: only a NULL means "not kept"
	// (a payload) or "no key" (a key; an empty key is a key).
	if payloadMissing {
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
const replayColumns = `id, status, retry_count, max_retries, last_feedback, source, dlq_topic, republished_at`

type replayTarget struct {
	id               uuid.UUID
	state            dlq.State
	lastFeedback     *string
	source, dlqTopic string
	republishedAt    *time.Time
}

func scanReplayTarget(row scanner) (*replayTarget, error) {
	var (
		r      replayTarget
		status string
	)
	if err := row.Scan(&r.id, &status, &r.state.RetryCount, &r.state.MaxRetries, &r.lastFeedback, &r.source,
		&r.dlqTopic, &r.republishedAt); err != nil {
		return nil, err
	}
	r.state.Status = dlq.Status(status)
	return &r, nil
}

// applyReturn updates r with in, a replay of it that failed again and came
// back; false when in is not our replay of r and must be stored as a new
// dead letter. The rule for x-dlq-id: the broker acknowledged a republish
// of r, and the message came back on the source and DLQ topic r was read
// from. A header copied onto another dead letter (Kafka Streams and many
// frameworks propagate headers) fails it.
func (s *sqlStore) applyReturn(ctx context.Context, q querier, in dlq.Incoming, r *replayTarget, opts dlq.IngestOptions, res *dlq.IngestResult) (bool, error) {
	if r.republishedAt == nil || in.Position.Source != r.source || in.Position.Topic != r.dlqTopic {
		return false, nil
	}
	pos := in.Position.String()
	if r.lastFeedback != nil && *r.lastFeedback == pos {
		res.Duplicates++ // this very return was applied before
		return true, nil
	}
	to, _ := r.state.Next(dlq.EventReturned)
	var next *time.Time
	if to.Status == dlq.StatusPending && opts.FeedbackRetryAt != nil {
		next = opts.FeedbackRetryAt(to.RetryCount)
	}
	reason := fmt.Sprintf("the replay failed again and came back to %s (partition %d, offset %d): %s",
		in.Position.Topic, in.Position.Partition, in.Position.Offset, in.ErrorMessage)
	entry := &dlq.Attempt{At: opts.Now, Outcome: dlq.OutcomeReturned, Error: reason}
	if _, err := q.exec(ctx, s.sql.dlq.returned, r.id, string(to.Status), to.RetryCount, in.ErrorMessage, next, pos,
		opts.Now, reason, attemptJSON(entry)); err != nil {
		return false, fmt.Errorf("update replayed dead letter: %w", err)
	}
	r.state, r.lastFeedback = to, &pos
	res.Feedback++
	if to.Status == dlq.StatusDead {
		res.Dead++
	}
	return true, nil
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
}

func newRowOf(in dlq.Incoming, opts dlq.IngestOptions) newRow {
	r := newRow{id: newID(), status: statusOf(in), nextRetryAt: firstRetry(in, opts), headers: headersJSON(in.Headers),
		attempts: attemptLog(in.Attempt)}
	if in.LastError != "" {
		r.lastError = &in.LastError
	}
	return r
}
