package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"
)

var sqliteDLQ = sqlstore.DLQSQL{
	Get:    `SELECT ` + sqlstore.DLQColumns + ` FROM dlq_messages WHERE id = ?1`,
	Delete: `DELETE FROM dlq_messages WHERE id = ?1`,
	Topics: `
		SELECT c.dlq_topic, c.status, c.n,
			(SELECT min(m.created_at) FROM dlq_messages m WHERE m.dlq_topic = c.dlq_topic AND m.status = 'PENDING')
		FROM (SELECT dlq_topic, status, sum(n) AS n FROM dlq_topic_counts GROUP BY 1, 2 HAVING sum(n) > 0) c
		ORDER BY c.dlq_topic`,
	ListPage: `
		SELECT ` + sqlstore.DLQColumns + ` FROM (
			SELECT * FROM (SELECT ` + sqlstore.DLQColumns + ` FROM dlq_messages WHERE dlq_topic = ?1 AND (?5 = '' OR status = ?5)
				ORDER BY created_at DESC, id DESC LIMIT ?4)
			UNION ALL
			SELECT * FROM (SELECT ` + sqlstore.DLQColumns + ` FROM dlq_messages WHERE original_topic = ?1 AND dlq_topic <> ?1
				AND (?5 = '' OR status = ?5)
				ORDER BY created_at DESC, id DESC LIMIT ?4)
		) ORDER BY created_at DESC, id DESC LIMIT ?2 OFFSET ?3`,
	ListCount: `
		SELECT COALESCE(sum(n), 0) FROM dlq_topic_counts
		WHERE (dlq_topic = ?1 OR (original_topic = ?1 AND dlq_topic <> ?1)) AND (?2 = '' OR status = ?2)`,
	Known: `
		SELECT EXISTS (SELECT 1 FROM dlq_messages WHERE source = ?1 AND dlq_topic = ?2 AND source_position = ?3
				AND ` + sqliteSameContent + `)
			OR EXISTS (SELECT 1 FROM dlq_messages_archive WHERE source = ?1 AND dlq_topic = ?2 AND source_position = ?3
				AND ` + sqliteSameContent + `)
			OR EXISTS (SELECT 1 FROM dlq_returns WHERE source = ?1 AND dlq_topic = ?2 AND source_position = ?3
				AND ` + sqliteSameContent + `)`,
	RecordReturn: `
		INSERT INTO dlq_returns (` + sqlstore.ReturnColumns + `) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
		ON CONFLICT DO NOTHING`,
	Returned: `
		UPDATE dlq_messages SET status = ?2, retry_count = ?3, error_message = ?4, next_retry_at = ?5,
			lease_owner = CASE WHEN ?2 = 'RETRYING' THEN lease_owner END,
			lease_expires_at = CASE WHEN ?2 = 'RETRYING' THEN lease_expires_at END,
			updated_at = ?6, last_error = ?7, attempt_log = ` + sqliteAppendAttempt("?8") + `
		WHERE id = ?1`,
	// A loose index scan of the due index: one probe per source.
	PendingSources: `
		WITH RECURSIVE s(source) AS (
			SELECT min(source) FROM dlq_messages WHERE status = 'PENDING'
			UNION ALL
			SELECT (SELECT min(m.source) FROM dlq_messages m WHERE m.status = 'PENDING' AND m.source > s.source)
			FROM s WHERE s.source IS NOT NULL
		)
		SELECT source FROM s WHERE source IS NOT NULL`,
	PendingOfSource: `
		SELECT dlq_topic, count(*) FROM dlq_messages WHERE status = 'PENDING' AND source = ?1
		GROUP BY dlq_topic ORDER BY dlq_topic`,
	List: func(l []string) any {
		if l == nil {
			l = []string{}
		}
		b, _ := json.Marshal(l) // strings always encode
		return string(b)
	},
	ClaimSQL: sqlstore.ClaimSQL{
		Claim: `
			UPDATE dlq_messages SET status = 'RETRYING', last_retry_at = ?2, lease_owner = ?3,
				lease_expires_at = ` + sqliteLeaseEnd("?4", "?5") + `, updated_at = ?2
			WHERE id = ?1 AND ` + sqlstore.Retryable + ` AND (status = 'PENDING' OR (lease_expires_at < ?2 AND lease_owner IS NOT ?3))
			RETURNING ` + sqlstore.DLQColumns,
		ClaimTopic: `
			UPDATE dlq_messages SET status = 'RETRYING', last_retry_at = ?5, lease_owner = ?6,
				lease_expires_at = ` + sqliteLeaseEnd("?7", "?8") + `, updated_at = ?5
			WHERE id IN (
				SELECT id FROM (
					SELECT * FROM (SELECT id, created_at FROM dlq_messages WHERE dlq_topic = ?1 AND status = 'PENDING'
						AND ` + sqlstore.Retryable + ` AND (created_at, id) > (?2, ?3) ORDER BY created_at, id LIMIT ?4)
					UNION ALL
					SELECT * FROM (SELECT id, created_at FROM dlq_messages WHERE original_topic = ?1 AND dlq_topic <> ?1
						AND status = 'PENDING' AND ` + sqlstore.Retryable + ` AND (created_at, id) > (?2, ?3)
						ORDER BY created_at, id LIMIT ?4)
				) ORDER BY created_at, id LIMIT ?4)
			RETURNING ` + sqlstore.DLQColumns,
		CountRetryable: `
			SELECT (SELECT count(*) FROM dlq_messages WHERE dlq_topic = ?1 AND status = 'PENDING' AND ` + sqlstore.Retryable + `)
				+ (SELECT count(*) FROM dlq_messages WHERE original_topic = ?1 AND dlq_topic <> ?1
					AND status = 'PENDING' AND ` + sqlstore.Retryable + `)`,
		ClaimDue: `
			UPDATE dlq_messages SET status = 'RETRYING', last_retry_at = ?1, lease_owner = ?3,
				lease_expires_at = ` + sqliteLeaseEnd("?4", "?7") + `, updated_at = ?1
			WHERE id IN (SELECT id FROM dlq_messages WHERE status = 'PENDING'
				AND source IN (SELECT value FROM json_each(?5)) AND next_retry_at <= ?1
				AND dlq_topic NOT IN (SELECT value FROM json_each(?6)) AND dlq_topic NOT IN (SELECT dlq_topic FROM dlq_topic_pauses WHERE resumed_at IS NULL)
				AND ` + sqlstore.Retryable + ` ORDER BY next_retry_at LIMIT ?2)
			RETURNING ` + sqlstore.DLQColumns,
		ReleaseExpired: `
			UPDATE dlq_messages SET status = ` + sqlstore.Released + `, lease_owner = NULL, lease_expires_at = NULL,
				next_retry_at = CASE WHEN retry_count < max_retries THEN ?1 END, updated_at = ?1
			WHERE status = 'RETRYING' AND lease_expires_at < ?1
				AND NOT (lease_owner IS ?2 AND id IN (SELECT value FROM json_each(?3)))`,
		Renew: `
			UPDATE dlq_messages SET lease_expires_at = ` + sqliteLeaseEnd("?4", "?5") + `
			WHERE id IN (SELECT value FROM json_each(?1)) AND status = 'RETRYING' AND lease_owner = ?2 AND last_retry_at = ?3`,
		Revive: `
			UPDATE dlq_messages SET status = ?6, retry_count = ?7, max_retries = ?2, next_retry_at = ?3,
				lease_owner = NULL, lease_expires_at = NULL, updated_at = ?4, attempt_log = ` + sqliteAppendAttempt("?5") + `
			WHERE id = ?1 AND status = ?8 AND NOT truncated AND original_topic <> ''
			RETURNING ` + sqlstore.DLQColumns,
		ClaimedRead: `SELECT ` + sqlstore.ClaimedColumns + ` FROM dlq_messages WHERE id IN (SELECT value FROM json_each(?1)) ORDER BY id`,
	},
	Unacked: sqlstore.UnackedSQL{
		Take: `
			DELETE FROM dlq_unacked WHERE rowid = (
				SELECT rowid FROM dlq_unacked WHERE source = ?1 AND dlq_topic = ?2 AND content_digest = ?3 AND stored_at >= ?4 AND NOT committing
				ORDER BY stored_at, source_position LIMIT 1)
			RETURNING message_id`,
		Keep: `
			INSERT INTO dlq_unacked (source, dlq_topic, source_position, content_digest, message_id, stored_at)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING`,
		KeepStored: `
			INSERT INTO dlq_unacked (source, dlq_topic, source_position, content_digest, message_id, stored_at)
			SELECT m.source, m.dlq_topic, m.source_position, m.content_digest, m.id, ?2
			FROM json_each(?1) AS u JOIN dlq_messages m ON m.source = json_extract(u.value, '$.s')
				AND m.dlq_topic = json_extract(u.value, '$.t') AND m.source_position = unhex(json_extract(u.value, '$.p'))
				AND m.content_digest = unhex(json_extract(u.value, '$.d'))
			WHERE true
			ON CONFLICT DO NOTHING`,
		Confirm: `
			DELETE FROM dlq_unacked WHERE rowid IN (SELECT u.rowid FROM dlq_unacked u JOIN json_each(?1) AS j
				ON u.source = json_extract(j.value, '$.s') AND u.dlq_topic = json_extract(j.value, '$.t')
				AND u.source_position = unhex(json_extract(j.value, '$.p')))`,
		Mark: `
			UPDATE dlq_unacked SET committing = ?2 WHERE rowid IN (SELECT u.rowid FROM dlq_unacked u JOIN json_each(?1) AS j
				ON u.source = json_extract(j.value, '$.s') AND u.dlq_topic = json_extract(j.value, '$.t')
				AND u.source_position = unhex(json_extract(j.value, '$.p')))`,
		Expire: `DELETE FROM dlq_unacked WHERE stored_at < ?1`,
	},
}

// sqliteLeaseEnd is the end of a lease written by a claim or a renewal:
// the lease the caller computed (until) moved on by the time the statement
// waited after the caller entered the store (entered, the wall clock then),
// read from SQLite's own clock when the statement runs. SQLite has one
// connection: a claim may wait for it longer than a lease, and a lease
// that ran out before it was written is taken again by another claim while
// the first one's message is still being sent.
func sqliteLeaseEnd(until, entered string) string {
	return "(" + until + " + max(0, CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) - " + entered + "))"
}

// sqliteSameContent matches the rows of a position whose digest is ?4, or
// unknown on either side (an empty digest).
const sqliteSameContent = `(content_digest = ?4 OR content_digest = x'' OR ?4 = x'')`

// sqliteAppendAttempt is the SQL that appends the JSON history entry in
// param to attempt_log, keeping the newest dlq.MaxAttempts.
func sqliteAppendAttempt(param string) string {
	return fmt.Sprintf("json_insert(CASE WHEN json_array_length(attempt_log) >= %d THEN json_remove(attempt_log, '$[0]')"+
		" ELSE attempt_log END, '$[#]', json(%s))", dlq.MaxAttempts, param)
}

// rawPayload is what goes into raw_payload: NULL for a null value (nil) or
// one too large to keep whole (truncated says which), an empty BLOB for an
// empty one.
func rawPayload(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

// sqliteIngest inserts one new dead letter, unless its position is stored
// already with the same digest, live or archived, or before digests (an
// empty one, which matches any): an archived position stays known; a
// position with another digest is a new dead letter.
const sqliteIngest = `
	INSERT INTO dlq_messages (` + sqlstore.DLQInsertColumns + `)
	SELECT ?1, ?2, ?3, 0, ?4, ?5, ?6, ?7, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21,
		?22, ?23, ?24, ?25, ?26
	WHERE NOT EXISTS (SELECT 1 FROM dlq_messages_archive a WHERE a.source = ?8 AND a.dlq_topic = ?9
			AND a.source_position = ?10 AND (a.content_digest = ?19 OR a.content_digest = x''))
		AND NOT EXISTS (SELECT 1 FROM dlq_messages m WHERE m.source = ?8 AND m.dlq_topic = ?9
			AND m.source_position = ?10 AND m.content_digest = x'')
	ON CONFLICT (source, dlq_topic, source_position, content_digest) DO NOTHING`

// IngestDLQ implements sqlstore.Driver, a message at a time in one transaction.
func (s *driver) IngestDLQ(ctx context.Context, params sqlstore.IngestDLQParams) (dlq.IngestResult, error) {
	opts := params.Options
	return s.store.Ingest(ctx, params.Batch, opts.Now, func(q sqlstore.Querier, batch []dlq.Incoming, res *dlq.IngestResult) error {
		ins, err := q.(sqliteConn).prepare(ctx, sqliteIngest) // a transaction's Querier is a sqliteConn
		if err != nil {
			return fmt.Errorf("insert dead letters: %w", err)
		}
		defer ins.close()
		groups := newBatchGroups()
		for _, in := range batch {
			taken, err := s.returnOf(ctx, q, in, opts, res)
			if err != nil {
				return err
			}
			if taken {
				continue
			}
			var payload *string
			if !in.NoJSON && json.Valid(in.Payload) {
				p := string(in.Payload)
				payload = &p
			}
			r := sqlstore.NewRowOf(in, opts)
			n, err := ins.Exec(ctx, r.ID, in.OriginalTopic, in.ErrorMessage, opts.MaxRetries, payload, r.Status, opts.Now,
				in.Position.Source, in.Position.Topic, in.Position.ID, in.Position.Display, in.Key, r.Headers,
				rawPayload(in.Payload), in.ProducedAt, r.NextRetryAt, r.LastError, r.Attempts, sqlstore.DigestOf(in), r.Group.ID, in.Truncated,
				in.Origin.ErrorClass, in.Origin.Attempts, in.Origin.FirstFailedAt, in.Origin.From, in.Origin.Configured)
			if err != nil {
				return fmt.Errorf("insert dead letter: %w", err)
			}
			if n == 1 {
				groups.add(r.Group, in, r.Status)
				res.Inserted++
			} else {
				res.Duplicates++
			}
		}
		return groups.flush(ctx, q, opts.Now)
	})
}

// returnOf handles in when it carries an x-dlq-id (see TakeReturn); false
// when it is to be stored as a new dead letter.
func (s *driver) returnOf(ctx context.Context, q sqlstore.Querier, in dlq.Incoming, opts dlq.IngestOptions, res *dlq.IngestResult) (bool, error) {
	if in.FeedbackOf == nil {
		return false, nil
	}
	t, err := sqlstore.ScanReplayTarget(q.QueryRow(ctx, `SELECT `+sqlstore.ReplayColumns+` FROM dlq_messages WHERE id = ?1`, *in.FeedbackOf))
	if errors.Is(err, derrors.ErrNotFound) {
		t, err = nil, nil
	}
	if err != nil {
		return false, fmt.Errorf("read replayed dead letter: %w", err)
	}
	return s.store.TakeReturn(ctx, q, in, t, opts, res)
}

// WriteOutcomes implements sqlstore.Driver: the outcomes of a FinishDLQ
// are written in one transaction, a statement each.
func (s *driver) WriteOutcomes(ctx context.Context, q sqlstore.Querier, params sqlstore.WriteOutcomesParams) error {
	now := params.Now
	for _, r := range params.Rows {
		if _, err := q.Exec(ctx, `
			UPDATE dlq_messages SET status = ?3, retry_count = ?4, next_retry_at = ?5,
				last_error = COALESCE(?6, last_error), republished_at = COALESCE(?7, republished_at),
				attempt_log = COALESCE(?8, attempt_log), lease_owner = NULL, lease_expires_at = NULL, updated_at = ?2
			WHERE id = ?1`,
			r.ID, now, r.Status, r.RetryCount, r.NextRetryAt, r.LastError, r.Republished, sqlstore.Text(r.Attempts)); err != nil {
			return fmt.Errorf("finish retry of %s: %w", r.ID, err)
		}
	}
	return nil
}

// PrepareClaimTopic implements sqlstore.Driver: SQLite keeps its
// statistics as they are.
func (s *driver) PrepareClaimTopic(context.Context, sqlstore.PrepareClaimTopicParams) {}
