package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"
)

var pgRetention = sqlstore.RetentionSQL{
	Count: `SELECT
		(SELECT count(*) FROM dlq.dlq_messages WHERE ` + sqlstore.Finished + ` AND updated_at < $1),
		(SELECT count(*) FROM dlq.dlq_messages_archive WHERE updated_at < $2)
			+ (SELECT count(*) FROM dlq.dlq_messages WHERE ` + sqlstore.Finished + ` AND updated_at < LEAST($1, $2)),
		(SELECT count(*) FROM lifecycle.idempotency_keys WHERE expires_at <= $3)`,
	Purge: `
		DELETE FROM dlq.dlq_messages_archive WHERE id IN (
			SELECT id FROM dlq.dlq_messages_archive WHERE updated_at < $1 ORDER BY updated_at LIMIT $2
			FOR UPDATE SKIP LOCKED)`,
	PurgeReturns: `
		DELETE FROM dlq.dlq_returns WHERE (source, dlq_topic, source_position, content_digest) IN (
			SELECT source, dlq_topic, source_position, content_digest FROM dlq.dlq_returns r
			WHERE applied_at < $1 AND NOT EXISTS (SELECT 1 FROM dlq.dlq_messages m WHERE m.id = r.message_id)
				AND NOT EXISTS (SELECT 1 FROM dlq.dlq_messages_archive a WHERE a.id = r.message_id)
			LIMIT $2 FOR UPDATE SKIP LOCKED)`,
	PurgeKeys: `
		DELETE FROM lifecycle.idempotency_keys WHERE (caller_uid, key) IN (
			SELECT caller_uid, key FROM lifecycle.idempotency_keys WHERE expires_at <= $1 LIMIT $2
			FOR UPDATE SKIP LOCKED)`,
}

// ArchiveDLQBatch implements sqlstore.Driver: one statement deletes the rows
// and inserts exactly those rows into the archive.
func (p *driver) ArchiveDLQBatch(ctx context.Context, params sqlstore.ArchiveDLQBatchParams) (int64, error) {
	var n int64
	if err := p.conn.QueryRow(ctx, `
		WITH to_archive AS (
			SELECT id FROM dlq.dlq_messages WHERE `+sqlstore.Finished+` AND updated_at < $1
			ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED
		), moved AS (
			DELETE FROM dlq.dlq_messages m USING to_archive t WHERE m.id = t.id RETURNING m.*
		), archived AS (
			INSERT INTO dlq.dlq_messages_archive SELECT * FROM moved RETURNING 1
		)
		SELECT count(*) FROM archived`, params.Cutoff, params.Limit).Scan(&n); err != nil {
		return 0, fmt.Errorf("archive dead letters: %w", err)
	}
	return n, nil
}

// retentionLockKey is the advisory lock that serialises retention passes
// across daemons sharing this database.
const retentionLockKey = 0x6c63642d726574 // "lcd-ret"

// TryRetentionLock implements sqlstore.Driver with a session advisory lock
// held on one pooled connection until unlock.
func (p *driver) TryRetentionLock(ctx context.Context) (func(), bool, error) {
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("take the retention lock: %w", pgError(err))
	}
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, int64(retentionLockKey)).Scan(&ok); err != nil {
		conn.Release()
		return nil, false, fmt.Errorf("take the retention lock: %w", pgError(err))
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
