package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for migrations

	"github.com/lifecycled/lifecycled/daemon/internal/archive"
	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/idempotency"
	"github.com/lifecycled/lifecycled/migrations"
)

// Postgres is the PostgreSQL state store.
type Postgres struct {
	pool *pgxpool.Pool
}

var _ Store = (*Postgres)(nil)

// OpenPostgres connects, migrates and returns the store.
func OpenPostgres(ctx context.Context, dsn string) (*Postgres, error) {
	if _, err := MigrateUp(ctx, migrations.Postgres, dsn); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse state store DSN: %w", redactPGError(err))
	}
	if cfg.MaxConns < 8 {
		cfg.MaxConns = 8
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "lifecycled"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to state store: %w", redactPGError(err))
	}
	return &Postgres{pool: pool}, nil
}

// Pool exposes the pool to tests and benchmarks in this module.
func (p *Postgres) Pool() *pgxpool.Pool { return p.pool }

// Dialect implements Store.
func (p *Postgres) Dialect() migrations.Dialect { return migrations.Postgres }

// Ping implements Store.
func (p *Postgres) Ping(ctx context.Context) error { return p.pool.Ping(ctx) }

// Close implements Store.
func (p *Postgres) Close() error { p.pool.Close(); return nil }

// redactPGError keeps passwords out of connection errors.
func redactPGError(err error) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		return errors.New("invalid connection string")
	}
	return err
}

// inTx runs fn in a transaction, retrying on deadlock and serialization
// failures, which concurrent daemons can cause and which are safe to retry.
func (p *Postgres) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	_, err := retryConflicts(func() (struct{}, error) { return struct{}{}, pgx.BeginFunc(ctx, p.pool, fn) })
	return err
}

// retryConflicts runs fn again, up to five times, when PostgreSQL rolled it
// back as a deadlock victim or for a serialization failure: nothing of it
// took effect, so running it again is safe. Statements that update dead
// letters can be victims when another daemon's transaction takes the
// per-topic counter rows in a different order.
func retryConflicts[T any](fn func() (T, error)) (T, error) {
	for attempt := 0; ; attempt++ {
		v, err := fn()
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001") && attempt < 5 {
			continue
		}
		return v, err
	}
}

const pgDLQColumns = `id, original_topic, error_message, retry_count, max_retries, status, created_at, updated_at,
	last_retry_at, source, dlq_topic, source_partition, source_offset, message_key, headers, raw_payload,
	produced_at, next_retry_at, last_error, attempt_log, republished_at, raw_payload IS NULL`

func scanPGMessage(row pgx.Row) (*dlq.Message, error) {
	var (
		m                 dlq.Message
		status            string
		headers, attempts []byte
		lastError         *string
		payloadMissing    bool
	)
	err := row.Scan(&m.ID, &m.OriginalTopic, &m.ErrorMessage, &m.RetryCount, &m.MaxRetries, &status,
		&m.CreatedAt, &m.UpdatedAt, &m.LastRetryAt, &m.Position.Source, &m.Position.Topic,
		&m.Position.Partition, &m.Position.Offset, &m.Key, &headers, &m.Payload, &m.ProducedAt, &m.NextRetryAt,
		&lastError, &attempts, &m.RepublishedAt, &payloadMissing)
	if err != nil {
		return nil, err
	}
	m.Status = dlq.Status(status)
	if m.Headers, err = decodeHeaders(headers); err != nil {
		return nil, fmt.Errorf("decode headers of %s: %w", m.ID, err)
	}
	if m.Attempts, err = decodeAttempts(attempts); err != nil {
		return nil, fmt.Errorf("decode attempts of %s: %w", m.ID, err)
	}
	if lastError != nil {
		m.LastError = *lastError
	}
	if payloadMissing {
		m.Payload = nil
	} else if m.Payload == nil {
		m.Payload = []byte{}
	}
	return &m, nil
}

// pgAppendAttempt is the SQL that appends the JSON entry in param to the
// attempt_log of table alias t (t may be ""), keeping the newest entries.
func pgAppendAttempt(t, param string) string {
	col := "attempt_log"
	if t != "" {
		col = t + ".attempt_log"
	}
	return fmt.Sprintf("(CASE WHEN jsonb_array_length(%[1]s) >= %[2]d THEN %[1]s - 0 ELSE %[1]s END) || jsonb_build_array(%[3]s::jsonb)",
		col, dlq.MaxAttempts, param)
}

func collectPGMessages(rows pgx.Rows) ([]dlq.Message, error) {
	defer rows.Close()
	var out []dlq.Message
	for rows.Next() {
		m, err := scanPGMessage(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *m)
	}
	return out, rows.Err()
}

// pgSafeJSON reports whether PostgreSQL's jsonb accepts payload: it rejects
// \u0000 and unpaired surrogates that encoding/json lets through. Such a
// payload is still stored byte for byte in raw_payload.
func pgSafeJSON(b []byte) bool {
	if !json.Valid(b) {
		return false
	}
	s := string(b)
	for i := strings.Index(s, `\u`); i >= 0; i = strings.Index(s, `\u`) {
		if len(s) >= i+6 {
			code := strings.ToLower(s[i+2 : i+6])
			if code == "0000" || (code[0] == 'd' && code[1] >= '8') {
				return false
			}
		}
		s = s[i+2:]
	}
	return true
}

// IngestDLQ implements dlq.Store. New messages go in as one INSERT over
// arrays (one round trip); returning replays are applied in the same
// transaction. A position already in the live table or in the archive is a
// duplicate: an archived position stays known, so a consumer group that
// reads it again does not make it a new dead letter.
func (p *Postgres) IngestDLQ(ctx context.Context, batch []dlq.Incoming, opts dlq.IngestOptions) (dlq.IngestResult, error) {
	var res dlq.IngestResult
	if len(batch) == 0 {
		return res, nil
	}
	err := p.inTx(ctx, func(tx pgx.Tx) error {
		res = dlq.IngestResult{}
		fresh, err := p.applyFeedback(ctx, tx, batch, opts, &res)
		if err != nil {
			return err
		}
		if len(fresh) == 0 {
			return nil
		}
		n := len(fresh)
		var (
			ids        = make([]uuid.UUID, n)
			origTopics = make([]string, n)
			errMsgs    = make([]string, n)
			payloads   = make([]*string, n)
			raws       = make([][]byte, n)
			sources    = make([]string, n)
			topics     = make([]string, n)
			parts      = make([]int32, n)
			offsets    = make([]int64, n)
			keys       = make([][]byte, n)
			headers    = make([][]byte, n)
			produced   = make([]*time.Time, n)
			statuses   = make([]string, n)
			nexts      = make([]*time.Time, n)
			lastErrs   = make([]*string, n)
			logs       = make([]string, n)
		)
		for i, in := range fresh {
			ids[i] = newID()
			origTopics[i] = in.OriginalTopic
			errMsgs[i] = in.ErrorMessage
			if pgSafeJSON(in.Payload) {
				s := string(in.Payload)
				payloads[i] = &s
			}
			raws[i] = in.Payload // nil (NULL) only for a message too large to keep whole
			sources[i] = in.Position.Source
			topics[i] = in.Position.Topic
			parts[i] = in.Position.Partition
			offsets[i] = in.Position.Offset
			keys[i] = in.Key
			headers[i] = []byte(headersJSON(in.Headers))
			produced[i] = in.ProducedAt
			statuses[i] = statusOf(in)
			nexts[i] = firstRetry(in, opts)
			if in.LastError != "" {
				lastErrs[i] = &in.LastError
			}
			logs[i] = attemptLog(in.Attempt)
		}
		// One statement: insert what is new, and add it to the counts.
		var inserted int64
		err = tx.QueryRow(ctx, `
			WITH ins AS (
				INSERT INTO dlq.dlq_messages (id, original_topic, error_message, retry_count, max_retries, payload,
					status, created_at, updated_at, source, dlq_topic, source_partition, source_offset, message_key,
					headers, raw_payload, produced_at, next_retry_at, last_error, attempt_log)
				SELECT u.id, u.ot, u.em, 0, $13, u.pl::jsonb, u.st, $14, $14, u.src, u.dt, u.pt, u.off, u.k,
					u.h, u.raw, u.prod, u.nx, u.le, u.al::jsonb
				FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::bytea[], $6::text[], $7::text[],
					$8::int[], $9::bigint[], $10::bytea[], $11::bytea[], $12::timestamptz[], $15::text[],
					$16::timestamptz[], $17::text[], $18::text[])
					AS u(id, ot, em, pl, raw, src, dt, pt, off, k, h, prod, st, nx, le, al)
				WHERE NOT EXISTS (SELECT 1 FROM dlq.dlq_messages_archive a WHERE a.source = u.src
					AND a.dlq_topic = u.dt AND a.source_partition = u.pt AND a.source_offset = u.off)
				ORDER BY u.id
				ON CONFLICT (source, dlq_topic, source_partition, source_offset) DO NOTHING
				RETURNING dlq_topic, original_topic, status
			), counted AS (
				INSERT INTO dlq.dlq_topic_counts AS c (dlq_topic, original_topic, status, n)
				SELECT dlq_topic, original_topic, status, count(*) FROM ins GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
				ON CONFLICT (dlq_topic, original_topic, status) DO UPDATE SET n = c.n + EXCLUDED.n
			)
			SELECT count(*) FROM ins`,
			ids, origTopics, errMsgs, payloads, raws, sources, topics, parts, offsets, keys, headers, produced,
			opts.MaxRetries, opts.Now, statuses, nexts, lastErrs, logs).Scan(&inserted)
		if err != nil {
			return fmt.Errorf("insert dead letters: %w", err)
		}
		res.Inserted = int(inserted)
		res.Duplicates = n - res.Inserted
		return nil
	})
	return res, err
}

func (p *Postgres) applyFeedback(ctx context.Context, tx pgx.Tx, batch []dlq.Incoming, opts dlq.IngestOptions, res *dlq.IngestResult) ([]dlq.Incoming, error) {
	var ids []uuid.UUID
	for _, in := range batch {
		if in.FeedbackOf != nil {
			ids = append(ids, *in.FeedbackOf)
		}
	}
	if len(ids) == 0 {
		return batch, nil
	}
	type rec struct {
		retryCount, maxRetries int
		lastFeedback           *string
		source, dlqTopic       string
		republishedAt          *time.Time
	}
	known := map[uuid.UUID]*rec{}
	rows, err := tx.Query(ctx, `SELECT id, retry_count, max_retries, last_feedback, source, dlq_topic, republished_at
		FROM dlq.dlq_messages WHERE id = ANY($1) ORDER BY id FOR UPDATE`, ids)
	if err != nil {
		return nil, fmt.Errorf("read replayed dead letters: %w", err)
	}
	for rows.Next() {
		var id uuid.UUID
		r := &rec{}
		if err := rows.Scan(&id, &r.retryCount, &r.maxRetries, &r.lastFeedback, &r.source, &r.dlqTopic, &r.republishedAt); err != nil {
			rows.Close()
			return nil, err
		}
		known[id] = r
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var fresh []dlq.Incoming
	for _, in := range batch {
		if in.FeedbackOf == nil || known[*in.FeedbackOf] == nil {
			fresh = append(fresh, in)
			continue
		}
		r := known[*in.FeedbackOf]
		if !isOurReplay(in, r.source, r.dlqTopic, r.republishedAt) {
			fresh = append(fresh, in)
			continue
		}
		pos := in.Position.String()
		if r.lastFeedback != nil && *r.lastFeedback == pos {
			res.Duplicates++ // this very return was applied before
			continue
		}
		status, count := dlq.AfterFailedAttempt(r.retryCount, r.maxRetries)
		var next *time.Time
		if status == dlq.StatusPending && opts.FeedbackRetryAt != nil {
			next = opts.FeedbackRetryAt(count)
		}
		entry, reason := returnAttempt(in, opts.Now)
		if _, err := tx.Exec(ctx, `UPDATE dlq.dlq_messages SET status = $2, retry_count = $3, error_message = $4,
				next_retry_at = $5, last_feedback = $6, lease_owner = NULL, lease_expires_at = NULL, updated_at = $7,
				last_error = $8, attempt_log = `+pgAppendAttempt("", "$9")+`
			WHERE id = $1`, *in.FeedbackOf, string(status), count, in.ErrorMessage, next, pos, opts.Now,
			reason, attemptJSON(entry)); err != nil {
			return nil, fmt.Errorf("update replayed dead letter: %w", err)
		}
		r.retryCount, r.lastFeedback = count, &pos
		res.Feedback++
		if status == dlq.StatusDead {
			res.Dead++
		}
	}
	return fresh, nil
}

// GetDLQ implements dlq.Store.
func (p *Postgres) GetDLQ(ctx context.Context, id uuid.UUID) (*dlq.Message, error) {
	m, err := scanPGMessage(p.pool.QueryRow(ctx, `SELECT `+pgDLQColumns+` FROM dlq.dlq_messages WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("dlq message %s: %w", id, derrors.ErrNotFound)
	}
	return m, err
}

// ListDLQ implements dlq.Store. Each topic column has its own ordered index;
// the union of two index scans keeps page 1 cheap on a million-row topic, and
// total_count comes from the counter table.
func (p *Postgres) ListDLQ(ctx context.Context, f dlq.ListFilter) ([]dlq.Message, int64, error) {
	offset := (f.Page - 1) * f.PageSize
	statusCond := ""
	args := []any{f.Topic, f.PageSize, offset, offset + f.PageSize}
	if f.Status != "" {
		statusCond = " AND status = $5"
		args = append(args, string(f.Status))
	}
	q := `SELECT ` + pgDLQColumns + ` FROM (
			(SELECT ` + pgDLQColumns + ` FROM dlq.dlq_messages WHERE dlq_topic = $1` + statusCond + `
			 ORDER BY created_at DESC, id DESC LIMIT $4)
			UNION ALL
			(SELECT ` + pgDLQColumns + ` FROM dlq.dlq_messages WHERE original_topic = $1 AND dlq_topic <> $1` + statusCond + `
			 ORDER BY created_at DESC, id DESC LIMIT $4)
		) t ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3`
	cq := `SELECT COALESCE(sum(n), 0)::bigint FROM dlq.dlq_topic_counts
		WHERE (dlq_topic = $1 OR (original_topic = $1 AND dlq_topic <> $1))`
	cargs := []any{f.Topic}
	if f.Status != "" {
		cq += ` AND status = $2`
		cargs = append(cargs, string(f.Status))
	}
	var (
		msgs  []dlq.Message
		total int64
	)
	// One snapshot for the page and the total, so they agree.
	err := pgx.BeginTxFunc(ctx, p.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, q, args...)
		if err != nil {
			return fmt.Errorf("list dead letters: %w", err)
		}
		if msgs, err = collectPGMessages(rows); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, cq, cargs...).Scan(&total); err != nil {
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
func (p *Postgres) DeleteDLQ(ctx context.Context, id uuid.UUID) error {
	tag, err := p.pool.Exec(ctx, `DELETE FROM dlq.dlq_messages WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete dead letter: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("dlq message %s: %w", id, derrors.ErrNotFound)
	}
	return nil
}

// DLQTopics implements dlq.Store.
func (p *Postgres) DLQTopics(ctx context.Context) ([]dlq.TopicSummary, error) {
	rows, err := p.pool.Query(ctx, `
		SELECT c.dlq_topic, c.status, c.n,
			(SELECT min(m.created_at) FROM dlq.dlq_messages m WHERE m.dlq_topic = c.dlq_topic AND m.status = 'PENDING')
		FROM (SELECT dlq_topic, status, sum(n)::bigint AS n FROM dlq.dlq_topic_counts GROUP BY 1, 2 HAVING sum(n) > 0) c
		ORDER BY c.dlq_topic`)
	if err != nil {
		return nil, fmt.Errorf("summarise topics: %w", err)
	}
	defer rows.Close()
	return collectTopicSummaries(func(yield func(topic, status string, n int64, oldest *time.Time)) error {
		for rows.Next() {
			var (
				topic, status string
				n             int64
				oldest        *time.Time
			)
			if err := rows.Scan(&topic, &status, &n, &oldest); err != nil {
				return err
			}
			yield(topic, status, n, oldest)
		}
		return rows.Err()
	})
}

// ClaimDLQ implements dlq.Store.
func (p *Postgres) ClaimDLQ(ctx context.Context, id uuid.UUID, c dlq.Claim) (*dlq.Message, error) {
	m, err := retryConflicts(func() (*dlq.Message, error) {
		return scanPGMessage(p.pool.QueryRow(ctx, `
		UPDATE dlq.dlq_messages SET status = 'RETRYING', last_retry_at = $2, lease_owner = $3, lease_expires_at = $4,
			updated_at = $2
		WHERE id = $1 AND retry_count < max_retries
			AND (status = 'PENDING' OR (status = 'RETRYING' AND lease_expires_at < $2))
		RETURNING `+pgDLQColumns, id, c.Now, c.Owner, c.LeaseUntil))
	})
	if err == nil {
		return m, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("claim dead letter: %w", err)
	}
	cur, err := p.GetDLQ(ctx, id)
	if err != nil {
		return nil, err
	}
	return nil, notRetryable(cur, c.Now)
}

func notRetryable(m *dlq.Message, now time.Time) error {
	if m.Status == dlq.StatusRetrying && m.RetryCount < m.MaxRetries {
		return &dlq.NotRetryableError{Message: m, Reason: fmt.Sprintf("message is being retried: status=%s, retry_count=%d/%d", m.Status, m.RetryCount, m.MaxRetries)}
	}
	return &dlq.NotRetryableError{Message: m, Reason: m.NotRetryableReason()}
}

// ClaimDLQTopic implements dlq.Store.
func (p *Postgres) ClaimDLQTopic(ctx context.Context, topic string, after *dlq.Cursor, limit int, c dlq.Claim) ([]dlq.Message, error) {
	afterT, afterID := time.Time{}, uuid.Nil
	if after != nil {
		afterT, afterID = after.CreatedAt, after.ID
	} else {
		p.refreshStats(ctx)
	}
	return retryConflicts(func() ([]dlq.Message, error) {
		return p.claimDLQTopic(ctx, topic, afterT, afterID, limit, c)
	})
}

func (p *Postgres) claimDLQTopic(ctx context.Context, topic string, afterT time.Time, afterID uuid.UUID, limit int, c dlq.Claim) ([]dlq.Message, error) {
	rows, err := p.pool.Query(ctx, `
		WITH cand AS (
			(SELECT id FROM dlq.dlq_messages WHERE dlq_topic = $1 AND status = 'PENDING'
				AND (created_at, id) > ($2, $3) ORDER BY created_at, id LIMIT $4)
			UNION ALL
			(SELECT id FROM dlq.dlq_messages WHERE original_topic = $1 AND dlq_topic <> $1 AND status = 'PENDING'
				AND (created_at, id) > ($2, $3) ORDER BY created_at, id LIMIT $4)
		), pick AS (
			SELECT m.id FROM dlq.dlq_messages m JOIN cand USING (id)
			WHERE m.status = 'PENDING' AND m.retry_count < m.max_retries
			ORDER BY m.created_at, m.id LIMIT $4
			FOR UPDATE OF m SKIP LOCKED
		)
		UPDATE dlq.dlq_messages m SET status = 'RETRYING', last_retry_at = $5, lease_owner = $6, lease_expires_at = $7,
			updated_at = $5
		FROM pick WHERE m.id = pick.id
		RETURNING `+prefixed("m", pgDLQColumns), topic, afterT, afterID, limit, c.Now, c.Owner, c.LeaseUntil)
	if err != nil {
		return nil, fmt.Errorf("claim topic: %w", err)
	}
	msgs, err := collectPGMessages(rows)
	sortByCreation(msgs)
	return msgs, err
}

// refreshStats analyzes the dead-letter table when a large share of it
// changed since the last analysis. A retry-all typically follows a burst of
// new dead letters, before autovacuum noticed it; with the old statistics the
// planner bitmap-scans and sorts the whole topic for every page of 100
// instead of walking its ordered index. Failures only cost speed.
func (p *Postgres) refreshStats(ctx context.Context) {
	var stale bool
	err := p.pool.QueryRow(ctx, `SELECT COALESCE(n_mod_since_analyze > GREATEST(10000, 0.1 * n_live_tup), false)
		FROM pg_stat_user_tables WHERE schemaname = 'dlq' AND relname = 'dlq_messages'`).Scan(&stale)
	if err == nil && stale {
		_, _ = p.pool.Exec(ctx, `ANALYZE dlq.dlq_messages`)
	}
}

// CountRetryableDLQTopic implements dlq.Store with ClaimDLQTopic's predicate.
func (p *Postgres) CountRetryableDLQTopic(ctx context.Context, topic string) (int64, error) {
	var n int64
	err := p.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM dlq.dlq_messages WHERE dlq_topic = $1 AND status = 'PENDING' AND retry_count < max_retries)
		+ (SELECT count(*) FROM dlq.dlq_messages WHERE original_topic = $1 AND dlq_topic <> $1
			AND status = 'PENDING' AND retry_count < max_retries)`, topic).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count retryable: %w", err)
	}
	return n, nil
}

// ClaimDueDLQ implements dlq.Store.
func (p *Postgres) ClaimDueDLQ(ctx context.Context, limit int, c dlq.Claim) ([]dlq.Message, error) {
	return retryConflicts(func() ([]dlq.Message, error) { return p.claimDueDLQ(ctx, limit, c) })
}

func (p *Postgres) claimDueDLQ(ctx context.Context, limit int, c dlq.Claim) ([]dlq.Message, error) {
	rows, err := p.pool.Query(ctx, `
		WITH due AS (
			SELECT id FROM dlq.dlq_messages
			WHERE status = 'PENDING' AND next_retry_at <= $1 AND retry_count < max_retries
			ORDER BY next_retry_at LIMIT $2 FOR UPDATE SKIP LOCKED
		)
		UPDATE dlq.dlq_messages m SET status = 'RETRYING', last_retry_at = $1, lease_owner = $3, lease_expires_at = $4,
			updated_at = $1
		FROM due WHERE m.id = due.id
		RETURNING `+prefixed("m", pgDLQColumns), c.Now, limit, c.Owner, c.LeaseUntil)
	if err != nil {
		return nil, fmt.Errorf("claim due retries: %w", err)
	}
	return collectPGMessages(rows)
}

// FinishDLQ implements dlq.Store in one statement, so that the per-topic
// counts trigger fires once and takes its counter rows in its sorted order.
// Separate statements for acked, counted and released messages in one
// transaction took them in statement order instead, and deadlocked against
// concurrent claims of the same topic.
func (p *Postgres) FinishDLQ(ctx context.Context, owner string, now time.Time, outcomes []dlq.Outcome) error {
	if len(outcomes) == 0 {
		return nil
	}
	ids := make([]uuid.UUID, len(outcomes))
	kinds := make([]string, len(outcomes))
	next := make([]*time.Time, len(outcomes))
	errs := make([]string, len(outcomes))
	entries := make([]*string, len(outcomes))
	for i, o := range outcomes {
		ids[i], next[i], errs[i], entries[i] = o.ID, o.NextRetryAt, o.Error, attemptJSON(o.Attempt)
		switch {
		case o.Acked:
			kinds[i], next[i] = "acked", nil
		case o.Counted:
			kinds[i] = "counted"
		default:
			kinds[i] = "released"
		}
	}
	// SET expressions all read the row as it was, so retry_count + 1 is the
	// attempt just made in every CASE. last_error keeps the last failure (an
	// acknowledged republish does not erase why earlier ones failed).
	_, err := retryConflicts(func() (pgconn.CommandTag, error) {
		return p.pool.Exec(ctx, `
		UPDATE dlq.dlq_messages m SET
			retry_count = m.retry_count + CASE WHEN u.kind = 'counted' THEN 1 ELSE 0 END,
			status = CASE
				WHEN u.kind = 'acked' THEN 'RESOLVED'
				WHEN u.kind = 'counted' AND m.retry_count + 1 >= m.max_retries THEN 'DEAD'
				ELSE 'PENDING' END,
			next_retry_at = CASE
				WHEN u.kind = 'acked' THEN NULL
				WHEN u.kind = 'counted' AND m.retry_count + 1 >= m.max_retries THEN NULL
				ELSE u.next END,
			last_error = CASE WHEN u.kind <> 'acked' AND u.err <> '' THEN u.err ELSE m.last_error END,
			republished_at = CASE WHEN u.kind = 'acked' THEN $3 ELSE m.republished_at END,
			attempt_log = CASE WHEN u.entry IS NULL THEN m.attempt_log ELSE `+pgAppendAttempt("m", "u.entry")+` END,
			lease_owner = NULL, lease_expires_at = NULL, updated_at = $3
		FROM unnest($1::uuid[], $4::text[], $5::timestamptz[], $6::text[], $7::text[]) AS u(id, kind, next, err, entry)
		WHERE m.id = u.id AND m.status = 'RETRYING' AND m.lease_owner = $2`, ids, owner, now, kinds, next, errs, entries)
	})
	if err != nil {
		return fmt.Errorf("record retry outcomes: %w", err)
	}
	return nil
}

// ReleaseExpiredDLQLeases implements dlq.Store.
func (p *Postgres) ReleaseExpiredDLQLeases(ctx context.Context, now time.Time) (int64, error) {
	tag, err := p.pool.Exec(ctx, `UPDATE dlq.dlq_messages SET status = 'PENDING', lease_owner = NULL,
			lease_expires_at = NULL, next_retry_at = $1, updated_at = $1
		WHERE status = 'RETRYING' AND lease_expires_at < $1`, now)
	if err != nil {
		return 0, fmt.Errorf("release expired leases: %w", err)
	}
	return tag.RowsAffected(), nil
}

// --- deletion jobs ---

const pgJobColumns = `id, tenant_id, status, attempts, verified, COALESCE(last_error, ''), created_at, updated_at,
	finished_at, next_attempt_at`

func scanPGJob(row pgx.Row) (*deletion.Job, error) {
	var j deletion.Job
	var status string
	if err := row.Scan(&j.ID, &j.TenantID, &status, &j.Attempts, &j.Verified, &j.LastError, &j.CreatedAt,
		&j.UpdatedAt, &j.FinishedAt, &j.NextAttemptAt); err != nil {
		return nil, err
	}
	j.Status = deletion.JobStatus(status)
	return &j, nil
}

type pgQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func (p *Postgres) loadDeleters(ctx context.Context, q pgQuerier, j *deletion.Job) error {
	rows, err := q.Query(ctx, `SELECT deleter, status, deleted_count, COALESCE(initial_count, -1), attempts,
		COALESCE(error, ''), updated_at, breakdown, verification
		FROM lifecycle.deletion_job_deleters WHERE job_id = $1 ORDER BY deleter`, j.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	j.Deleters = nil
	for rows.Next() {
		var (
			d                       deletion.DeleterState
			st                      string
			breakdown, verification []byte
		)
		if err := rows.Scan(&d.Name, &st, &d.DeletedCount, &d.Total, &d.Attempts, &d.Error, &d.UpdatedAt,
			&breakdown, &verification); err != nil {
			return err
		}
		d.Status = deletion.DeleterStatus(st)
		if err := decodeDeleterDetail(&d, breakdown, verification); err != nil {
			return err
		}
		j.Deleters = append(j.Deleters, d)
	}
	return rows.Err()
}

// CreateDeletionJob implements deletion.JobStore.
func (p *Postgres) CreateDeletionJob(ctx context.Context, tenant string, deleters []string, now time.Time) (*deletion.Job, bool, error) {
	var (
		job     *deletion.Job
		created bool
	)
	err := p.inTx(ctx, func(tx pgx.Tx) error {
		id := newID()
		tag, err := tx.Exec(ctx, `INSERT INTO lifecycle.deletion_jobs (id, tenant_id, status, created_at, updated_at, next_attempt_at)
			VALUES ($1, $2, 'PENDING', $3, $3, $3) ON CONFLICT (tenant_id) WHERE status <> 'COMPLETED' DO NOTHING`, id, tenant, now)
		if err != nil {
			return fmt.Errorf("create deletion job: %w", err)
		}
		created = tag.RowsAffected() == 1
		if created {
			for _, d := range deleters {
				if _, err := tx.Exec(ctx, `INSERT INTO lifecycle.deletion_job_deleters (job_id, deleter, status, updated_at)
					VALUES ($1, $2, 'PENDING', $3)`, id, d, now); err != nil {
					return err
				}
			}
		}
		job, err = scanPGJob(tx.QueryRow(ctx, `SELECT `+pgJobColumns+` FROM lifecycle.deletion_jobs
			WHERE tenant_id = $1 AND status <> 'COMPLETED'`, tenant))
		if err != nil {
			return err
		}
		return p.loadDeleters(ctx, tx, job)
	})
	return job, created, err
}

// LatestDeletionJob implements deletion.JobStore.
func (p *Postgres) LatestDeletionJob(ctx context.Context, tenant string) (*deletion.Job, error) {
	j, err := scanPGJob(p.pool.QueryRow(ctx, `SELECT `+pgJobColumns+` FROM lifecycle.deletion_jobs
		WHERE tenant_id = $1 ORDER BY created_at DESC, id DESC LIMIT 1`, tenant))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("deletion job for tenant %q: %w", tenant, derrors.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return j, p.loadDeleters(ctx, p.pool, j)
}

// ClaimDeletionJob implements deletion.JobStore.
func (p *Postgres) ClaimDeletionJob(ctx context.Context, owner string, now, leaseUntil time.Time) (*deletion.Job, error) {
	j, err := scanPGJob(p.pool.QueryRow(ctx, `
		WITH due AS (
			SELECT id FROM lifecycle.deletion_jobs
			WHERE (status IN ('PENDING', 'PARTIAL') AND next_attempt_at <= $1)
				OR (status = 'RUNNING' AND lease_expires_at < $1)
			ORDER BY next_attempt_at NULLS FIRST, created_at LIMIT 1 FOR UPDATE SKIP LOCKED
		)
		UPDATE lifecycle.deletion_jobs j SET status = 'RUNNING', attempts = j.attempts + 1, lease_owner = $2,
			lease_expires_at = $3, updated_at = $1
		FROM due WHERE j.id = due.id
		RETURNING `+prefixed("j", pgJobColumns), now, owner, leaseUntil))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim deletion job: %w", err)
	}
	return j, p.loadDeleters(ctx, p.pool, j)
}

// RenewDeletionLease implements deletion.JobStore.
func (p *Postgres) RenewDeletionLease(ctx context.Context, id uuid.UUID, owner string, leaseUntil time.Time) error {
	tag, err := p.pool.Exec(ctx, `UPDATE lifecycle.deletion_jobs SET lease_expires_at = $3
		WHERE id = $1 AND lease_owner = $2 AND status = 'RUNNING'`, id, owner, leaseUntil)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("deletion job %s: %w", id, derrors.ErrLeaseLost)
	}
	return nil
}

// SetDeleterState implements deletion.JobStore.
func (p *Postgres) SetDeleterState(ctx context.Context, id uuid.UUID, owner string, st deletion.DeleterState) error {
	breakdown, verification, err := encodeDeleterDetail(st)
	if err != nil {
		return err
	}
	tag, err := p.pool.Exec(ctx, `
		INSERT INTO lifecycle.deletion_job_deleters AS d (job_id, deleter, status, deleted_count, initial_count, attempts, error,
			updated_at, breakdown, verification)
		SELECT $1, $3, $4, $5, NULLIF($9, -1), $6, NULLIF($7, ''), $8, $10::jsonb, $11::jsonb
		FROM lifecycle.deletion_jobs j WHERE j.id = $1 AND j.lease_owner = $2 AND j.status = 'RUNNING'
		ON CONFLICT (job_id, deleter) DO UPDATE SET status = EXCLUDED.status, deleted_count = EXCLUDED.deleted_count,
			initial_count = EXCLUDED.initial_count, attempts = EXCLUDED.attempts, error = EXCLUDED.error,
			updated_at = EXCLUDED.updated_at, breakdown = EXCLUDED.breakdown, verification = EXCLUDED.verification`,
		id, owner, st.Name, string(st.Status), st.DeletedCount, st.Attempts, st.Error, st.UpdatedAt, st.Total,
		breakdown, verification)
	if err != nil {
		return fmt.Errorf("store deleter progress: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("deletion job %s: %w", id, derrors.ErrLeaseLost)
	}
	return nil
}

// FinishDeletionAttempt implements deletion.JobStore.
func (p *Postgres) FinishDeletionAttempt(ctx context.Context, id uuid.UUID, owner string, u deletion.JobUpdate) error {
	var finished *time.Time
	if u.Status == deletion.JobCompleted {
		finished = &u.Now
	}
	tag, err := p.pool.Exec(ctx, `UPDATE lifecycle.deletion_jobs SET status = $3, verified = $4, last_error = NULLIF($5, ''),
			next_attempt_at = $6, finished_at = $7, updated_at = $8, lease_owner = NULL, lease_expires_at = NULL
		WHERE id = $1 AND lease_owner = $2 AND status = 'RUNNING'`,
		id, owner, string(u.Status), u.Verified, u.LastError, u.NextAttemptAt, finished, u.Now)
	if err != nil {
		return fmt.Errorf("finish deletion attempt: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("deletion job %s: %w", id, derrors.ErrLeaseLost)
	}
	return nil
}

// --- idempotency ---

// ReserveIdempotencyKey implements idempotency.Store.
func (p *Postgres) ReserveIdempotencyKey(ctx context.Context, rec idempotency.Record, now, staleBefore time.Time) (*idempotency.Record, error) {
	var holder *idempotency.Record
	err := p.inTx(ctx, func(tx pgx.Tx) error {
		holder = nil
		tag, err := tx.Exec(ctx, `
			INSERT INTO lifecycle.idempotency_keys AS k (caller_uid, key, route, request_hash, state, created_at, locked_at, expires_at)
			VALUES ($1, $2, $3, $4, 'IN_FLIGHT', $5, $5, $6)
			ON CONFLICT (caller_uid, key) DO UPDATE SET route = EXCLUDED.route, request_hash = EXCLUDED.request_hash,
				state = 'IN_FLIGHT', response_status = NULL, response_body = NULL, created_at = EXCLUDED.created_at,
				locked_at = EXCLUDED.locked_at, expires_at = EXCLUDED.expires_at
			WHERE k.expires_at <= $5 OR (k.state = 'IN_FLIGHT' AND k.locked_at < $7)`,
			int64(rec.CallerUID), rec.Key, rec.Route, rec.RequestHash, now, rec.ExpiresAt, staleBefore)
		if err != nil {
			return fmt.Errorf("reserve idempotency key: %w", err)
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
		h := idempotency.Record{CallerUID: rec.CallerUID, Key: rec.Key}
		var status *int
		var state string
		if err := tx.QueryRow(ctx, `SELECT route, request_hash, state, response_status, response_body, created_at, locked_at, expires_at
			FROM lifecycle.idempotency_keys WHERE caller_uid = $1 AND key = $2`, int64(rec.CallerUID), rec.Key).
			Scan(&h.Route, &h.RequestHash, &state, &status, &h.ResponseBody, &h.CreatedAt, &h.LockedAt, &h.ExpiresAt); err != nil {
			return fmt.Errorf("read idempotency key: %w", err)
		}
		h.State = idempotency.State(state)
		if status != nil {
			h.ResponseStatus = *status
		}
		holder = &h
		return nil
	})
	return holder, err
}

// CompleteIdempotencyKey implements idempotency.Store.
func (p *Postgres) CompleteIdempotencyKey(ctx context.Context, uid uint32, key, hash string, status int, body []byte, expiresAt time.Time) error {
	_, err := p.pool.Exec(ctx, `UPDATE lifecycle.idempotency_keys SET state = 'DONE', response_status = $4,
			response_body = $5, expires_at = $6
		WHERE caller_uid = $1 AND key = $2 AND request_hash = $3 AND state = 'IN_FLIGHT'`,
		int64(uid), key, hash, status, nonNil(body), expiresAt)
	return err
}

// ReleaseIdempotencyKey implements idempotency.Store.
func (p *Postgres) ReleaseIdempotencyKey(ctx context.Context, uid uint32, key, hash string) error {
	_, err := p.pool.Exec(ctx, `DELETE FROM lifecycle.idempotency_keys
		WHERE caller_uid = $1 AND key = $2 AND request_hash = $3 AND state = 'IN_FLIGHT'`, int64(uid), key, hash)
	return err
}

// --- retention ---

// ArchiveDLQBatch implements archive.Store: one statement deletes the rows
// and inserts exactly those rows into the archive.
func (p *Postgres) ArchiveDLQBatch(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	var n int64
	err := p.pool.QueryRow(ctx, `
		WITH to_archive AS (
			SELECT id FROM dlq.dlq_messages
			WHERE status IN ('RESOLVED', 'DEAD') AND updated_at < $1
			ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED
		), moved AS (
			DELETE FROM dlq.dlq_messages m USING to_archive t WHERE m.id = t.id RETURNING m.*
		), archived AS (
			INSERT INTO dlq.dlq_messages_archive SELECT * FROM moved RETURNING 1
		)
		SELECT count(*) FROM archived`, cutoff, limit).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("archive dead letters: %w", err)
	}
	return n, nil
}

// CountRetentionCandidates implements archive.Store with the predicates of
// ArchiveDLQBatch, PurgeDLQArchiveBatch and PurgeExpiredIdempotencyKeys.
func (p *Postgres) CountRetentionCandidates(ctx context.Context, archiveCutoff, purgeCutoff, now time.Time) (archive.RetentionCounts, error) {
	var c archive.RetentionCounts
	err := p.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM dlq.dlq_messages WHERE status IN ('RESOLVED', 'DEAD') AND updated_at < $1),
		(SELECT count(*) FROM dlq.dlq_messages_archive WHERE updated_at < $2)
			+ (SELECT count(*) FROM dlq.dlq_messages WHERE status IN ('RESOLVED', 'DEAD') AND updated_at < LEAST($1, $2)),
		(SELECT count(*) FROM lifecycle.idempotency_keys WHERE expires_at <= $3)`,
		archiveCutoff, purgeCutoff, now).Scan(&c.Archive, &c.PurgeArchive, &c.PurgeKeys)
	if err != nil {
		return c, fmt.Errorf("count retention candidates: %w", err)
	}
	return c, nil
}

// PurgeDLQArchiveBatch implements archive.Store.
func (p *Postgres) PurgeDLQArchiveBatch(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	tag, err := p.pool.Exec(ctx, `DELETE FROM dlq.dlq_messages_archive WHERE id IN (
		SELECT id FROM dlq.dlq_messages_archive WHERE updated_at < $1 ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
		cutoff, limit)
	if err != nil {
		return 0, fmt.Errorf("purge archive: %w", err)
	}
	return tag.RowsAffected(), nil
}

// PurgeExpiredIdempotencyKeys implements archive.Store.
func (p *Postgres) PurgeExpiredIdempotencyKeys(ctx context.Context, now time.Time, limit int) (int64, error) {
	tag, err := p.pool.Exec(ctx, `DELETE FROM lifecycle.idempotency_keys WHERE (caller_uid, key) IN (
		SELECT caller_uid, key FROM lifecycle.idempotency_keys WHERE expires_at <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`,
		now, limit)
	if err != nil {
		return 0, fmt.Errorf("purge idempotency keys: %w", err)
	}
	return tag.RowsAffected(), nil
}

// retentionLockKey is the advisory lock that serialises retention passes
// across daemons sharing this database.
const retentionLockKey = 0x6c63642d726574 // "lcd-ret"

// TryRetentionLock implements archive.Store with a session advisory lock
// held on one pooled connection until unlock.
func (p *Postgres) TryRetentionLock(ctx context.Context) (func(), bool, error) {
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return nil, false, err
	}
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, int64(retentionLockKey)).Scan(&ok); err != nil {
		conn.Release()
		return nil, false, err
	}
	if !ok {
		conn.Release()
		return nil, false, nil
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, int64(retentionLockKey)); err != nil {
			// A connection whose unlock failed may still hold the lock; close
			// it instead of returning it to the pool.
			_ = conn.Conn().Close(ctx)
		}
		conn.Release()
	}, true, nil
}

// prefixed qualifies a column list with a table alias.
func prefixed(alias, cols string) string {
	parts := strings.Split(cols, ",")
	for i, c := range parts {
		c = strings.TrimSpace(c)
		if strings.HasPrefix(c, "COALESCE(") {
			parts[i] = "COALESCE(" + alias + "." + strings.TrimPrefix(c, "COALESCE(")
			continue
		}
		if strings.HasPrefix(c, "'") || strings.HasSuffix(c, ")") {
			parts[i] = c
			continue
		}
		parts[i] = alias + "." + c
	}
	return strings.Join(parts, ", ")
}
