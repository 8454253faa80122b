package sqlite

import (
	"context"
	"fmt"

	"github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"
)

var sqliteRetention = sqlstore.RetentionSQL{
	Count: `SELECT
		(SELECT count(*) FROM dlq_messages WHERE ` + sqlstore.Finished + ` AND updated_at < ?1),
		(SELECT count(*) FROM dlq_messages_archive WHERE updated_at < ?2)
			+ (SELECT count(*) FROM dlq_messages WHERE ` + sqlstore.Finished + ` AND updated_at < min(?1, ?2)),
		(SELECT count(*) FROM idempotency_keys WHERE expires_at <= ?3)`,
	Purge: `
		DELETE FROM dlq_messages_archive WHERE id IN (
			SELECT id FROM dlq_messages_archive WHERE updated_at < ?1 ORDER BY updated_at LIMIT ?2)`,
	PurgeReturns: `
		DELETE FROM dlq_returns WHERE rowid IN (
			SELECT rowid FROM dlq_returns r WHERE applied_at < ?1
				AND NOT EXISTS (SELECT 1 FROM dlq_messages m WHERE m.id = r.message_id)
				AND NOT EXISTS (SELECT 1 FROM dlq_messages_archive a WHERE a.id = r.message_id)
			LIMIT ?2)`,
	PurgeKeys: `
		DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM idempotency_keys WHERE expires_at <= ?1 LIMIT ?2)`,
}

// ArchiveDLQBatch implements sqlstore.Driver. SQLite has no data-modifying
// CTEs, so one transaction copies the chosen ids and deletes the same ids,
// and rolls back unless both touched the same number of rows.
func (s *driver) ArchiveDLQBatch(ctx context.Context, params sqlstore.ArchiveDLQBatchParams) (int64, error) {
	var moved int64
	err := s.conn.Tx(ctx, func(q sqlstore.Querier) error {
		moved = 0
		if _, err := q.Exec(ctx, `CREATE TEMP TABLE IF NOT EXISTS archive_ids (id TEXT PRIMARY KEY)`); err != nil {
			return err
		}
		if _, err := q.Exec(ctx, `DELETE FROM archive_ids`); err != nil {
			return err
		}
		if _, err := q.Exec(ctx, `INSERT INTO archive_ids SELECT id FROM dlq_messages
			WHERE `+sqlstore.Finished+` AND updated_at < ?1 ORDER BY updated_at LIMIT ?2`, params.Cutoff, params.Limit); err != nil {
			return err
		}
		ni, err := q.Exec(ctx, `INSERT INTO dlq_messages_archive SELECT * FROM dlq_messages
			WHERE id IN (SELECT id FROM archive_ids)`)
		if err != nil {
			return fmt.Errorf("copy to archive: %w", err)
		}
		nd, err := q.Exec(ctx, `DELETE FROM dlq_messages WHERE id IN (SELECT id FROM archive_ids)`)
		if err != nil {
			return fmt.Errorf("delete archived: %w", err)
		}
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

// TryRetentionLock implements sqlstore.Driver. One daemon owns a SQLite file,
// so an in-process lock is enough.
func (s *driver) TryRetentionLock(context.Context) (func(), bool, error) {
	if !s.retentionLock.TryLock() {
		return nil, false, nil
	}
	return s.retentionLock.Unlock, true, nil
}
