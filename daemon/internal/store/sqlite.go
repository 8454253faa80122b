package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"

	"sync"
	"time"

	"github.com/google/uuid"
	_ "modernc.org/sqlite" // database/sql driver "sqlite", pure Go

	"github.com/lifecycled/lifecycled/daemon/internal/archive"
	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/idempotency"
	"github.com/lifecycled/lifecycled/migrations"
)

// SQLite is the embedded state store. It serves one daemon: every statement
// runs on a single connection, which makes each transaction serial and keeps
// SQLITE_BUSY out of the picture; WAL keeps readers of the file (backups,
// sqlite3 shells) from blocking it.
type SQLite struct {
	db            *sql.DB
	retentionLock sync.Mutex
}

var _ Store = (*SQLite)(nil)

func sqliteDSN(path string) string {
	q := url.Values{}
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "foreign_keys(1)", "synchronous(NORMAL)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	return "file:" + path + "?" + q.Encode()
}

// OpenSQLite opens (creating if needed), migrates and returns the store.
func OpenSQLite(ctx context.Context, path string) (*SQLite, error) {
	if _, err := MigrateUp(ctx, migrations.SQLite, path); err != nil {
		return nil, err
	}
	// Dead letters hold other systems' payloads: only the daemon's user
	// reads the file (SQLite gives -wal and -shm the same mode).
	if path != ":memory:" {
		if err := os.Chmod(path, 0o600); err != nil {
			return nil, fmt.Errorf("restrict state store permissions: %w", err)
		}
	}
	db, err := sql.Open("sqlite", sqliteDSN(path))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(0)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open state store %s: %w", path, err)
	}
	return &SQLite{db: db}, nil
}

// DB exposes the handle to tests in this module.
func (s *SQLite) DB() *sql.DB { return s.db }

// Dialect implements Store.
func (s *SQLite) Dialect() migrations.Dialect { return migrations.SQLite }

// Ping implements Store.
func (s *SQLite) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// Close implements Store.
func (s *SQLite) Close() error { return s.db.Close() }

func (s *SQLite) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func us(t time.Time) int64 { return t.UnixMicro() }

func usPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

func fromUS(v int64) time.Time { return time.UnixMicro(v).UTC() }

func fromUSPtr(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromUS(v.Int64)
	return &t
}

const sqliteDLQColumns = `id, original_topic, error_message, retry_count, max_retries, status, created_at, updated_at,
	last_retry_at, source, dlq_topic, source_partition, source_offset, message_key, headers, raw_payload,
	produced_at, next_retry_at, last_error, attempt_log, republished_at, raw_payload IS NULL, message_key IS NULL`

type scanner interface{ Scan(dest ...any) error }

func scanSQLiteMessage(row scanner) (*dlq.Message, error) {
	var (
		m                                           dlq.Message
		id, status, headers, attempts               string
		created, updated                            int64
		lastRetry, produced, nextRetry, republished sql.NullInt64
		lastError                                   sql.NullString
		payloadMissing, keyNull                     bool
	)
	err := row.Scan(&id, &m.OriginalTopic, &m.ErrorMessage, &m.RetryCount, &m.MaxRetries, &status, &created,
		&updated, &lastRetry, &m.Position.Source, &m.Position.Topic, &m.Position.Partition, &m.Position.Offset,
		&m.Key, &headers, &m.Payload, &produced, &nextRetry, &lastError, &attempts, &republished, &payloadMissing, &keyNull)
	if err != nil {
		return nil, err
	}
	if m.ID, err = uuid.Parse(id); err != nil {
		return nil, err
	}
	m.Status = dlq.Status(status)
	m.CreatedAt, m.UpdatedAt = fromUS(created), fromUS(updated)
	m.LastRetryAt, m.ProducedAt, m.NextRetryAt = fromUSPtr(lastRetry), fromUSPtr(produced), fromUSPtr(nextRetry)
	m.RepublishedAt, m.LastError = fromUSPtr(republished), lastError.String
	if m.Headers, err = decodeHeaders([]byte(headers)); err != nil {
		return nil, fmt.Errorf("decode headers of %s: %w", id, err)
	}
	if m.Attempts, err = decodeAttempts([]byte(attempts)); err != nil {
		return nil, fmt.Errorf("decode attempts of %s: %w", id, err)
	}
	// The driver reads an empty BLOB as nil: only a NULL means "not kept"
	// (a payload) or "no key" (a key; an empty key is a key).
	if payloadMissing {
		m.Payload = nil
	} else if m.Payload == nil {
		m.Payload = []byte{}
	}
	if !keyNull && m.Key == nil {
		m.Key = []byte{}
	}
	return &m, nil
}

func collectSQLiteMessages(rows *sql.Rows, err error) ([]dlq.Message, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []dlq.Message
	for rows.Next() {
		m, err := scanSQLiteMessage(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *m)
	}
	return out, rows.Err()
}

// IngestDLQ implements dlq.Store. A position already in the live table or
// in the archive is a duplicate (an archived position stays known).
func (s *SQLite) IngestDLQ(ctx context.Context, batch []dlq.Incoming, opts dlq.IngestOptions) (dlq.IngestResult, error) {
	var res dlq.IngestResult
	if len(batch) == 0 {
		return res, nil
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res = dlq.IngestResult{}
		ins, err := tx.PrepareContext(ctx, `INSERT INTO dlq_messages (id, original_topic, error_message, retry_count,
				max_retries, payload, status, created_at, updated_at, source, dlq_topic, source_partition, source_offset,
				message_key, headers, raw_payload, produced_at, next_retry_at, last_error, attempt_log)
			SELECT ?1, ?2, ?3, 0, ?4, ?5, ?6, ?7, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18
			WHERE NOT EXISTS (SELECT 1 FROM dlq_messages_archive a WHERE a.source = ?8 AND a.dlq_topic = ?9
				AND a.source_partition = ?10 AND a.source_offset = ?11)
			ON CONFLICT (source, dlq_topic, source_partition, source_offset) DO NOTHING`)
		if err != nil {
			return err
		}
		defer ins.Close()
		for _, in := range batch {
			if in.FeedbackOf != nil {
				applied, err := s.applyFeedback(ctx, tx, in, opts, &res)
				if err != nil {
					return err
				}
				if applied {
					continue
				}
			}
			var payload any
			if json.Valid(in.Payload) {
				payload = string(in.Payload)
			}
			var lastErr any
			if in.LastError != "" {
				lastErr = in.LastError
			}
			r, err := ins.ExecContext(ctx, newID().String(), in.OriginalTopic, in.ErrorMessage, opts.MaxRetries, payload,
				statusOf(in), us(opts.Now), in.Position.Source, in.Position.Topic, in.Position.Partition,
				in.Position.Offset, in.Key, headersJSON(in.Headers), rawPayload(in.Payload), usPtr(in.ProducedAt),
				usPtr(firstRetry(in, opts)), lastErr, attemptLog(in.Attempt))
			if err != nil {
				return fmt.Errorf("insert dead letter: %w", err)
			}
			if n, _ := r.RowsAffected(); n == 1 {
				res.Inserted++
			} else {
				res.Duplicates++
			}
		}
		return nil
	})
	return res, err
}

// applyFeedback updates the record a returning replay refers to; false when
// there is no such record and the message must be stored as new.
func (s *SQLite) applyFeedback(ctx context.Context, tx *sql.Tx, in dlq.Incoming, opts dlq.IngestOptions, res *dlq.IngestResult) (bool, error) {
	var (
		retryCount, maxRetries int
		last                   sql.NullString
		source, dlqTopic       string
		republished            sql.NullInt64
	)
	err := tx.QueryRowContext(ctx, `SELECT retry_count, max_retries, last_feedback, source, dlq_topic, republished_at
		FROM dlq_messages WHERE id = ?`, in.FeedbackOf.String()).Scan(&retryCount, &maxRetries, &last, &source, &dlqTopic, &republished)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !isOurReplay(in, source, dlqTopic, fromUSPtr(republished)) {
		return false, nil
	}
	pos := in.Position.String()
	if last.Valid && last.String == pos {
		res.Duplicates++
		return true, nil
	}
	status, count := dlq.AfterFailedAttempt(retryCount, maxRetries)
	var next *time.Time
	if status == dlq.StatusPending && opts.FeedbackRetryAt != nil {
		next = opts.FeedbackRetryAt(count)
	}
	entry, reason := returnAttempt(in, opts.Now)
	if _, err := tx.ExecContext(ctx, `UPDATE dlq_messages SET status = ?1, retry_count = ?2, error_message = ?3,
			next_retry_at = ?4, last_feedback = ?5, lease_owner = NULL, lease_expires_at = NULL, updated_at = ?6,
			last_error = ?8, attempt_log = `+sqliteAppendAttempt("?9")+`
		WHERE id = ?7`, string(status), count, in.ErrorMessage, usPtr(next), pos, us(opts.Now), in.FeedbackOf.String(),
		reason, attemptJSON(entry)); err != nil {
		return false, fmt.Errorf("update replayed dead letter: %w", err)
	}
	res.Feedback++
	if status == dlq.StatusDead {
		res.Dead++
	}
	return true, nil
}

// GetDLQ implements dlq.Store.
func (s *SQLite) GetDLQ(ctx context.Context, id uuid.UUID) (*dlq.Message, error) {
	m, err := scanSQLiteMessage(s.db.QueryRowContext(ctx, `SELECT `+sqliteDLQColumns+` FROM dlq_messages WHERE id = ?`, id.String()))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("dlq message %s: %w", id, derrors.ErrNotFound)
	}
	return m, err
}

// ListDLQ implements dlq.Store.
func (s *SQLite) ListDLQ(ctx context.Context, f dlq.ListFilter) ([]dlq.Message, int64, error) {
	offset := (f.Page - 1) * f.PageSize
	statusCond := ""
	var statusArg []any
	if f.Status != "" {
		statusCond = " AND status = ?"
		statusArg = []any{string(f.Status)}
	}
	args := append([]any{f.Topic}, statusArg...)
	args = append(args, offset+f.PageSize, f.Topic, f.Topic)
	args = append(args, statusArg...)
	args = append(args, offset+f.PageSize, f.PageSize, offset)
	q := `SELECT ` + sqliteDLQColumns + ` FROM (
			SELECT * FROM (SELECT ` + sqliteDLQColumns + ` FROM dlq_messages WHERE dlq_topic = ?` + statusCond + `
				ORDER BY created_at DESC, id DESC LIMIT ?)
			UNION ALL
			SELECT * FROM (SELECT ` + sqliteDLQColumns + ` FROM dlq_messages WHERE original_topic = ? AND dlq_topic <> ?` + statusCond + `
				ORDER BY created_at DESC, id DESC LIMIT ?)
		) ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`
	cq := `SELECT COALESCE(sum(n), 0) FROM dlq_topic_counts WHERE (dlq_topic = ? OR (original_topic = ? AND dlq_topic <> ?))`
	cargs := []any{f.Topic, f.Topic, f.Topic}
	if f.Status != "" {
		cq += ` AND status = ?`
		cargs = append(cargs, string(f.Status))
	}
	var (
		msgs  []dlq.Message
		total int64
	)
	// One transaction for the page and the total, so they agree.
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		if msgs, err = collectSQLiteMessages(tx.QueryContext(ctx, q, args...)); err != nil {
			return fmt.Errorf("list dead letters: %w", err)
		}
		if err := tx.QueryRowContext(ctx, cq, cargs...).Scan(&total); err != nil {
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
func (s *SQLite) DeleteDLQ(ctx context.Context, id uuid.UUID) error {
	r, err := s.db.ExecContext(ctx, `DELETE FROM dlq_messages WHERE id = ?`, id.String())
	if err != nil {
		return fmt.Errorf("delete dead letter: %w", err)
	}
	if n, _ := r.RowsAffected(); n == 0 {
		return fmt.Errorf("dlq message %s: %w", id, derrors.ErrNotFound)
	}
	return nil
}

// DLQTopics implements dlq.Store.
func (s *SQLite) DLQTopics(ctx context.Context) ([]dlq.TopicSummary, error) {
	rows, err := s.db.QueryContext(ctx, `
		SELECT c.dlq_topic, c.status, c.n,
			(SELECT min(m.created_at) FROM dlq_messages m WHERE m.dlq_topic = c.dlq_topic AND m.status = 'PENDING')
		FROM (SELECT dlq_topic, status, sum(n) AS n FROM dlq_topic_counts GROUP BY 1, 2 HAVING sum(n) > 0) c
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
				oldest        sql.NullInt64
			)
			if err := rows.Scan(&topic, &status, &n, &oldest); err != nil {
				return err
			}
			yield(topic, status, n, fromUSPtr(oldest))
		}
		return rows.Err()
	})
}

// ClaimDLQ implements dlq.Store.
func (s *SQLite) ClaimDLQ(ctx context.Context, id uuid.UUID, c dlq.Claim) (*dlq.Message, error) {
	m, err := scanSQLiteMessage(s.db.QueryRowContext(ctx, `
		UPDATE dlq_messages SET status = 'RETRYING', last_retry_at = ?2, lease_owner = ?3, lease_expires_at = ?4,
			updated_at = ?2
		WHERE id = ?1 AND retry_count < max_retries
			AND (status = 'PENDING' OR (status = 'RETRYING' AND lease_expires_at < ?2))
		RETURNING `+sqliteDLQColumns, id.String(), us(c.Now), c.Owner, us(c.LeaseUntil)))
	if err == nil {
		return m, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("claim dead letter: %w", err)
	}
	cur, err := s.GetDLQ(ctx, id)
	if err != nil {
		return nil, err
	}
	return nil, notRetryable(cur, c.Now)
}

// ClaimDLQTopic implements dlq.Store.
func (s *SQLite) ClaimDLQTopic(ctx context.Context, topic string, after *dlq.Cursor, limit int, c dlq.Claim) ([]dlq.Message, error) {
	afterT, afterID := int64(-1<<62), ""
	if after != nil {
		afterT, afterID = us(after.CreatedAt), after.ID.String()
	}
	msgs, err := collectSQLiteMessages(s.db.QueryContext(ctx, `
		UPDATE dlq_messages SET status = 'RETRYING', last_retry_at = ?5, lease_owner = ?6, lease_expires_at = ?7,
			updated_at = ?5
		WHERE id IN (
			SELECT id FROM (
				SELECT * FROM (SELECT id, created_at FROM dlq_messages WHERE dlq_topic = ?1 AND status = 'PENDING'
					AND retry_count < max_retries AND (created_at, id) > (?2, ?3) ORDER BY created_at, id LIMIT ?4)
				UNION ALL
				SELECT * FROM (SELECT id, created_at FROM dlq_messages WHERE original_topic = ?1 AND dlq_topic <> ?1
					AND status = 'PENDING' AND retry_count < max_retries AND (created_at, id) > (?2, ?3)
					ORDER BY created_at, id LIMIT ?4)
			) ORDER BY created_at, id LIMIT ?4)
		RETURNING `+sqliteDLQColumns, topic, afterT, afterID, limit, us(c.Now), c.Owner, us(c.LeaseUntil)))
	if err != nil {
		return nil, fmt.Errorf("claim topic: %w", err)
	}
	sortByCreation(msgs)
	return msgs, nil
}

// CountRetryableDLQTopic implements dlq.Store with ClaimDLQTopic's predicate.
func (s *SQLite) CountRetryableDLQTopic(ctx context.Context, topic string) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM dlq_messages WHERE dlq_topic = ?1 AND status = 'PENDING' AND retry_count < max_retries)
		+ (SELECT count(*) FROM dlq_messages WHERE original_topic = ?1 AND dlq_topic <> ?1
			AND status = 'PENDING' AND retry_count < max_retries)`, topic).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count retryable: %w", err)
	}
	return n, nil
}

// ClaimDueDLQ implements dlq.Store.
func (s *SQLite) ClaimDueDLQ(ctx context.Context, limit int, c dlq.Claim) ([]dlq.Message, error) {
	msgs, err := collectSQLiteMessages(s.db.QueryContext(ctx, `
		UPDATE dlq_messages SET status = 'RETRYING', last_retry_at = ?1, lease_owner = ?3, lease_expires_at = ?4,
			updated_at = ?1
		WHERE id IN (SELECT id FROM dlq_messages WHERE status = 'PENDING' AND next_retry_at <= ?1
			AND retry_count < max_retries ORDER BY next_retry_at LIMIT ?2)
		RETURNING `+sqliteDLQColumns, us(c.Now), limit, c.Owner, us(c.LeaseUntil)))
	if err != nil {
		return nil, fmt.Errorf("claim due retries: %w", err)
	}
	return msgs, nil
}

// FinishDLQ implements dlq.Store.
func (s *SQLite) FinishDLQ(ctx context.Context, owner string, now time.Time, outcomes []dlq.Outcome) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		for _, o := range outcomes {
			var err error
			// ?5 is the failure (kept as last_error), ?6 the history entry.
			var lastErr any
			if o.Error != "" && !o.Acked {
				lastErr = o.Error
			}
			history := `attempt_log = CASE WHEN ?6 IS NULL THEN attempt_log ELSE ` + sqliteAppendAttempt("?6") + ` END,
				last_error = COALESCE(?5, last_error)`
			switch {
			case o.Acked:
				_, err = tx.ExecContext(ctx, `UPDATE dlq_messages SET status = 'RESOLVED', lease_owner = NULL,
					lease_expires_at = NULL, next_retry_at = NULL, updated_at = ?3, republished_at = ?3, `+history+`
					WHERE id = ?1 AND status = 'RETRYING' AND lease_owner = ?2`, o.ID.String(), owner, us(now), nil, lastErr, attemptJSON(o.Attempt))
			case o.Counted:
				_, err = tx.ExecContext(ctx, `UPDATE dlq_messages SET retry_count = retry_count + 1,
						status = CASE WHEN retry_count + 1 >= max_retries THEN 'DEAD' ELSE 'PENDING' END,
						next_retry_at = CASE WHEN retry_count + 1 >= max_retries THEN NULL ELSE ?4 END,
						lease_owner = NULL, lease_expires_at = NULL, updated_at = ?3, `+history+`
					WHERE id = ?1 AND status = 'RETRYING' AND lease_owner = ?2`, o.ID.String(), owner, us(now), usPtr(o.NextRetryAt),
					lastErr, attemptJSON(o.Attempt))
			default:
				_, err = tx.ExecContext(ctx, `UPDATE dlq_messages SET status = 'PENDING', next_retry_at = ?4,
						lease_owner = NULL, lease_expires_at = NULL, updated_at = ?3, `+history+`
					WHERE id = ?1 AND status = 'RETRYING' AND lease_owner = ?2`, o.ID.String(), owner, us(now), usPtr(o.NextRetryAt),
					lastErr, attemptJSON(o.Attempt))
			}
			if err != nil {
				return fmt.Errorf("finish retry of %s: %w", o.ID, err)
			}
		}
		return nil
	})
}

// ReleaseExpiredDLQLeases implements dlq.Store.
func (s *SQLite) ReleaseExpiredDLQLeases(ctx context.Context, now time.Time) (int64, error) {
	r, err := s.db.ExecContext(ctx, `UPDATE dlq_messages SET status = 'PENDING', lease_owner = NULL,
			lease_expires_at = NULL, next_retry_at = ?1, updated_at = ?1
		WHERE status = 'RETRYING' AND lease_expires_at < ?1`, us(now))
	if err != nil {
		return 0, fmt.Errorf("release expired leases: %w", err)
	}
	return r.RowsAffected()
}

// --- deletion jobs ---

const sqliteJobColumns = `id, tenant_id, status, attempts, verified, COALESCE(last_error, ''), created_at, updated_at,
	finished_at, next_attempt_at`

func scanSQLiteJob(row scanner) (*deletion.Job, error) {
	var (
		j                deletion.Job
		id, status       string
		created, updated int64
		finished, next   sql.NullInt64
	)
	if err := row.Scan(&id, &j.TenantID, &status, &j.Attempts, &j.Verified, &j.LastError, &created, &updated,
		&finished, &next); err != nil {
		return nil, err
	}
	var err error
	if j.ID, err = uuid.Parse(id); err != nil {
		return nil, err
	}
	j.Status = deletion.JobStatus(status)
	j.CreatedAt, j.UpdatedAt = fromUS(created), fromUS(updated)
	j.FinishedAt, j.NextAttemptAt = fromUSPtr(finished), fromUSPtr(next)
	return &j, nil
}

type sqlQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func (s *SQLite) loadDeleters(ctx context.Context, q sqlQuerier, j *deletion.Job) error {
	rows, err := q.QueryContext(ctx, `SELECT deleter, status, deleted_count, COALESCE(initial_count, -1), attempts,
		COALESCE(error, ''), updated_at, COALESCE(breakdown, ''), COALESCE(verification, '')
		FROM deletion_job_deleters WHERE job_id = ? ORDER BY deleter`, j.ID.String())
	if err != nil {
		return err
	}
	defer rows.Close()
	j.Deleters = nil
	for rows.Next() {
		var (
			d                       deletion.DeleterState
			st                      string
			updated                 int64
			breakdown, verification string
		)
		if err := rows.Scan(&d.Name, &st, &d.DeletedCount, &d.Total, &d.Attempts, &d.Error, &updated,
			&breakdown, &verification); err != nil {
			return err
		}
		d.Status, d.UpdatedAt = deletion.DeleterStatus(st), fromUS(updated)
		if err := decodeDeleterDetail(&d, []byte(breakdown), []byte(verification)); err != nil {
			return err
		}
		j.Deleters = append(j.Deleters, d)
	}
	return rows.Err()
}

// CreateDeletionJob implements deletion.JobStore.
func (s *SQLite) CreateDeletionJob(ctx context.Context, tenant string, deleters []string, now time.Time) (*deletion.Job, bool, error) {
	var (
		job     *deletion.Job
		created bool
	)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		id := newID().String()
		r, err := tx.ExecContext(ctx, `INSERT INTO deletion_jobs (id, tenant_id, status, created_at, updated_at, next_attempt_at)
			VALUES (?1, ?2, 'PENDING', ?3, ?3, ?3) ON CONFLICT (tenant_id) WHERE status <> 'COMPLETED' DO NOTHING`, id, tenant, us(now))
		if err != nil {
			return fmt.Errorf("create deletion job: %w", err)
		}
		n, _ := r.RowsAffected()
		created = n == 1
		if created {
			for _, d := range deleters {
				if _, err := tx.ExecContext(ctx, `INSERT INTO deletion_job_deleters (job_id, deleter, status, updated_at)
					VALUES (?, ?, 'PENDING', ?)`, id, d, us(now)); err != nil {
					return err
				}
			}
		}
		job, err = scanSQLiteJob(tx.QueryRowContext(ctx, `SELECT `+sqliteJobColumns+` FROM deletion_jobs
			WHERE tenant_id = ? AND status <> 'COMPLETED'`, tenant))
		if err != nil {
			return err
		}
		return s.loadDeleters(ctx, tx, job)
	})
	return job, created, err
}

// LatestDeletionJob implements deletion.JobStore.
func (s *SQLite) LatestDeletionJob(ctx context.Context, tenant string) (*deletion.Job, error) {
	j, err := scanSQLiteJob(s.db.QueryRowContext(ctx, `SELECT `+sqliteJobColumns+` FROM deletion_jobs
		WHERE tenant_id = ? ORDER BY created_at DESC, id DESC LIMIT 1`, tenant))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("deletion job for tenant %q: %w", tenant, derrors.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return j, s.loadDeleters(ctx, s.db, j)
}

// ClaimDeletionJob implements deletion.JobStore.
func (s *SQLite) ClaimDeletionJob(ctx context.Context, owner string, now, leaseUntil time.Time) (*deletion.Job, error) {
	j, err := scanSQLiteJob(s.db.QueryRowContext(ctx, `
		UPDATE deletion_jobs SET status = 'RUNNING', attempts = attempts + 1, lease_owner = ?2, lease_expires_at = ?3,
			updated_at = ?1
		WHERE id = (SELECT id FROM deletion_jobs
			WHERE (status IN ('PENDING', 'PARTIAL') AND next_attempt_at <= ?1) OR (status = 'RUNNING' AND lease_expires_at < ?1)
			ORDER BY next_attempt_at, created_at LIMIT 1)
		RETURNING `+sqliteJobColumns, us(now), owner, us(leaseUntil)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim deletion job: %w", err)
	}
	return j, s.loadDeleters(ctx, s.db, j)
}

// RenewDeletionLease implements deletion.JobStore.
func (s *SQLite) RenewDeletionLease(ctx context.Context, id uuid.UUID, owner string, leaseUntil time.Time) error {
	r, err := s.db.ExecContext(ctx, `UPDATE deletion_jobs SET lease_expires_at = ? WHERE id = ? AND lease_owner = ?
		AND status = 'RUNNING'`, us(leaseUntil), id.String(), owner)
	if err != nil {
		return err
	}
	if n, _ := r.RowsAffected(); n == 0 {
		return fmt.Errorf("deletion job %s: %w", id, derrors.ErrLeaseLost)
	}
	return nil
}

// SetDeleterState implements deletion.JobStore.
func (s *SQLite) SetDeleterState(ctx context.Context, id uuid.UUID, owner string, st deletion.DeleterState) error {
	breakdown, verification, err := encodeDeleterDetail(st)
	if err != nil {
		return err
	}
	r, err := s.db.ExecContext(ctx, `
		INSERT INTO deletion_job_deleters (job_id, deleter, status, deleted_count, initial_count, attempts, error, updated_at,
			breakdown, verification)
		SELECT ?1, ?3, ?4, ?5, NULLIF(?9, -1), ?6, NULLIF(?7, ''), ?8, ?10, ?11
		FROM deletion_jobs j WHERE j.id = ?1 AND j.lease_owner = ?2 AND j.status = 'RUNNING'
		ON CONFLICT (job_id, deleter) DO UPDATE SET status = excluded.status, deleted_count = excluded.deleted_count,
			initial_count = excluded.initial_count, attempts = excluded.attempts, error = excluded.error,
			updated_at = excluded.updated_at, breakdown = excluded.breakdown, verification = excluded.verification`,
		id.String(), owner, st.Name, string(st.Status), st.DeletedCount, st.Attempts, st.Error, us(st.UpdatedAt), st.Total,
		nullText(breakdown), nullText(verification))
	if err != nil {
		return fmt.Errorf("store deleter progress: %w", err)
	}
	if n, _ := r.RowsAffected(); n == 0 {
		return fmt.Errorf("deletion job %s: %w", id, derrors.ErrLeaseLost)
	}
	return nil
}

// FinishDeletionAttempt implements deletion.JobStore.
func (s *SQLite) FinishDeletionAttempt(ctx context.Context, id uuid.UUID, owner string, u deletion.JobUpdate) error {
	var finished *time.Time
	if u.Status == deletion.JobCompleted {
		finished = &u.Now
	}
	r, err := s.db.ExecContext(ctx, `UPDATE deletion_jobs SET status = ?3, verified = ?4, last_error = NULLIF(?5, ''),
			next_attempt_at = ?6, finished_at = ?7, updated_at = ?8, lease_owner = NULL, lease_expires_at = NULL
		WHERE id = ?1 AND lease_owner = ?2 AND status = 'RUNNING'`,
		id.String(), owner, string(u.Status), u.Verified, u.LastError, usPtr(u.NextAttemptAt), usPtr(finished), us(u.Now))
	if err != nil {
		return fmt.Errorf("finish deletion attempt: %w", err)
	}
	if n, _ := r.RowsAffected(); n == 0 {
		return fmt.Errorf("deletion job %s: %w", id, derrors.ErrLeaseLost)
	}
	return nil
}

// --- idempotency ---

// ReserveIdempotencyKey implements idempotency.Store.
func (s *SQLite) ReserveIdempotencyKey(ctx context.Context, rec idempotency.Record, now, staleBefore time.Time) (*idempotency.Record, error) {
	var holder *idempotency.Record
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `
			INSERT INTO idempotency_keys (caller_uid, key, route, request_hash, state, created_at, locked_at, expires_at)
			VALUES (?1, ?2, ?3, ?4, 'IN_FLIGHT', ?5, ?5, ?6)
			ON CONFLICT (caller_uid, key) DO UPDATE SET route = excluded.route, request_hash = excluded.request_hash,
				state = 'IN_FLIGHT', response_status = NULL, response_body = NULL, created_at = excluded.created_at,
				locked_at = excluded.locked_at, expires_at = excluded.expires_at
			WHERE expires_at <= ?5 OR (state = 'IN_FLIGHT' AND locked_at < ?7)`,
			int64(rec.CallerUID), rec.Key, rec.Route, rec.RequestHash, us(now), us(rec.ExpiresAt), us(staleBefore))
		if err != nil {
			return fmt.Errorf("reserve idempotency key: %w", err)
		}
		if n, _ := r.RowsAffected(); n == 1 {
			return nil
		}
		h := idempotency.Record{CallerUID: rec.CallerUID, Key: rec.Key}
		var (
			status                   sql.NullInt64
			state                    string
			created, locked, expires int64
		)
		if err := tx.QueryRowContext(ctx, `SELECT route, request_hash, state, response_status, response_body,
				created_at, locked_at, expires_at FROM idempotency_keys WHERE caller_uid = ? AND key = ?`,
			int64(rec.CallerUID), rec.Key).Scan(&h.Route, &h.RequestHash, &state, &status, &h.ResponseBody,
			&created, &locked, &expires); err != nil {
			return fmt.Errorf("read idempotency key: %w", err)
		}
		h.State = idempotency.State(state)
		h.ResponseStatus = int(status.Int64)
		h.CreatedAt, h.LockedAt, h.ExpiresAt = fromUS(created), fromUS(locked), fromUS(expires)
		holder = &h
		return nil
	})
	return holder, err
}

// CompleteIdempotencyKey implements idempotency.Store.
func (s *SQLite) CompleteIdempotencyKey(ctx context.Context, uid uint32, key, hash string, status int, body []byte, expiresAt time.Time) error {
	_, err := s.db.ExecContext(ctx, `UPDATE idempotency_keys SET state = 'DONE', response_status = ?, response_body = ?,
			expires_at = ?
		WHERE caller_uid = ? AND key = ? AND request_hash = ? AND state = 'IN_FLIGHT'`,
		status, nonNil(body), us(expiresAt), int64(uid), key, hash)
	return err
}

// ReleaseIdempotencyKey implements idempotency.Store.
func (s *SQLite) ReleaseIdempotencyKey(ctx context.Context, uid uint32, key, hash string) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE caller_uid = ? AND key = ? AND request_hash = ?
		AND state = 'IN_FLIGHT'`, int64(uid), key, hash)
	return err
}

// --- retention ---

// ArchiveDLQBatch implements archive.Store. SQLite has no data-modifying
// CTEs, so one transaction copies the chosen ids and deletes the same ids,
// and rolls back unless both touched the same number of rows.
func (s *SQLite) ArchiveDLQBatch(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	var moved int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		moved = 0
		if _, err := tx.ExecContext(ctx, `CREATE TEMP TABLE IF NOT EXISTS archive_ids (id TEXT PRIMARY KEY)`); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM archive_ids`); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO archive_ids SELECT id FROM dlq_messages
			WHERE status IN ('RESOLVED', 'DEAD') AND updated_at < ? ORDER BY updated_at LIMIT ?`, us(cutoff), limit); err != nil {
			return err
		}
		ins, err := tx.ExecContext(ctx, `INSERT INTO dlq_messages_archive SELECT * FROM dlq_messages
			WHERE id IN (SELECT id FROM archive_ids)`)
		if err != nil {
			return fmt.Errorf("copy to archive: %w", err)
		}
		del, err := tx.ExecContext(ctx, `DELETE FROM dlq_messages WHERE id IN (SELECT id FROM archive_ids)`)
		if err != nil {
			return fmt.Errorf("delete archived: %w", err)
		}
		ni, _ := ins.RowsAffected()
		nd, _ := del.RowsAffected()
		if ni != nd {
			return fmt.Errorf("archive batch copied %d rows but would delete %d; rolled back", ni, nd)
		}
		moved = nd
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("archive dead letters: %w", err)
	}
	return moved, nil
}

// CountRetentionCandidates implements archive.Store with the predicates of
// ArchiveDLQBatch, PurgeDLQArchiveBatch and PurgeExpiredIdempotencyKeys.
func (s *SQLite) CountRetentionCandidates(ctx context.Context, archiveCutoff, purgeCutoff, now time.Time) (archive.RetentionCounts, error) {
	var c archive.RetentionCounts
	err := s.db.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM dlq_messages WHERE status IN ('RESOLVED', 'DEAD') AND updated_at < ?1),
		(SELECT count(*) FROM dlq_messages_archive WHERE updated_at < ?2)
			+ (SELECT count(*) FROM dlq_messages WHERE status IN ('RESOLVED', 'DEAD') AND updated_at < min(?1, ?2)),
		(SELECT count(*) FROM idempotency_keys WHERE expires_at <= ?3)`,
		us(archiveCutoff), us(purgeCutoff), us(now)).Scan(&c.Archive, &c.PurgeArchive, &c.PurgeKeys)
	if err != nil {
		return c, fmt.Errorf("count retention candidates: %w", err)
	}
	return c, nil
}

// PurgeDLQArchiveBatch implements archive.Store.
func (s *SQLite) PurgeDLQArchiveBatch(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	r, err := s.db.ExecContext(ctx, `DELETE FROM dlq_messages_archive WHERE id IN (
		SELECT id FROM dlq_messages_archive WHERE updated_at < ? ORDER BY updated_at LIMIT ?)`, us(cutoff), limit)
	if err != nil {
		return 0, fmt.Errorf("purge archive: %w", err)
	}
	return r.RowsAffected()
}

// PurgeExpiredIdempotencyKeys implements archive.Store.
func (s *SQLite) PurgeExpiredIdempotencyKeys(ctx context.Context, now time.Time, limit int) (int64, error) {
	r, err := s.db.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE rowid IN (
		SELECT rowid FROM idempotency_keys WHERE expires_at <= ? LIMIT ?)`, us(now), limit)
	if err != nil {
		return 0, fmt.Errorf("purge idempotency keys: %w", err)
	}
	return r.RowsAffected()
}

// TryRetentionLock implements archive.Store. One daemon owns a SQLite file,
// so an in-process lock is enough.
func (s *SQLite) TryRetentionLock(context.Context) (func(), bool, error) {
	if !s.retentionLock.TryLock() {
		return nil, false, nil
	}
	return s.retentionLock.Unlock, true, nil
}
