package sqlite

import "github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"

var sqliteOps = sqlstore.OpSQL{
	Insert: `
		INSERT INTO dlq_operations (id, action, state, filter, target_topic, rate, created_at, updated_at, requested_by_uid,
			lease_owner, lease_expires_at, started_at)
		VALUES (?1, ?2, 'RUNNING', ?3, ?4, ?5, ?6, ?6, ?7, ?8, ?9, CASE WHEN ?8 IS NULL THEN NULL ELSE ?6 END)`,
	ItemsOfIDs: `
		INSERT INTO dlq_operation_items (operation_id, seq, message_id)
		SELECT ?2, row_number() OVER (ORDER BY created_at, id), id FROM dlq_messages WHERE id IN (SELECT value FROM json_each(?1))`,
	CountIDs:    `SELECT count(*) FROM dlq_messages WHERE id IN (SELECT value FROM json_each(?1))`,
	ItemsPrefix: `INSERT INTO dlq_operation_items (operation_id, seq, message_id) `,
	SetMatched:  `UPDATE dlq_operations SET matched = ?2 WHERE id = ?1`,
	Get:         `SELECT ` + sqlstore.OpColumns + ` FROM dlq_operations WHERE id = ?1`,
	List:        `SELECT ` + sqlstore.OpColumns + ` FROM dlq_operations WHERE (?2 = 0 OR state = 'RUNNING') ORDER BY created_at DESC, id DESC LIMIT ?1`,
	Claim: `
		UPDATE dlq_operations SET lease_owner = ?2, lease_expires_at = ?3, started_at = COALESCE(started_at, ?1), updated_at = ?1
		WHERE id = (SELECT id FROM dlq_operations WHERE state = 'RUNNING' AND (lease_expires_at IS NULL OR lease_expires_at < ?1)
			ORDER BY created_at, id LIMIT 1)
		RETURNING ` + sqlstore.OpColumns,
	Renew:        `UPDATE dlq_operations SET lease_expires_at = ?3 WHERE id = ?1 AND lease_owner = ?2 AND state = 'RUNNING'`,
	Items:        `SELECT seq, message_id FROM dlq_operation_items WHERE operation_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3`,
	Failures:     `SELECT seq, message_id, outcome, COALESCE(error, '') FROM dlq_operation_items WHERE operation_id = ?1 AND outcome IS NOT NULL ORDER BY seq LIMIT ?2`,
	LockProgress: `SELECT position, outcomes, done_ranges, COALESCE(lease_owner, ''), state FROM dlq_operations WHERE id = ?1`,
	AllAnswered: `SELECT seq, answered, COALESCE(answered_error, '') FROM dlq_operation_items
		WHERE operation_id = ?1 AND answered IS NOT NULL ORDER BY seq`,
	Advance: `
		UPDATE dlq_operations SET position = ?2, done = done + ?3, succeeded = succeeded + ?4, failed = failed + ?5,
			outcomes = ?6, updated_at = ?7, done_ranges = ?8 WHERE id = ?1`,
	Answered: `SELECT seq, answered, COALESCE(answered_error, '') FROM dlq_operation_items
		WHERE operation_id = ?1 AND seq IN (SELECT value FROM json_each(?2)) AND answered IS NOT NULL`,
	MarkAnswered: `UPDATE dlq_operation_items SET answered = ?3, answered_error = NULLIF(?4, '') WHERE operation_id = ?1 AND seq = ?2`,
	ItemFailed:   `UPDATE dlq_operation_items SET outcome = ?3, error = NULLIF(?4, '') WHERE operation_id = ?1 AND seq = ?2`,
	Finish: `
		UPDATE dlq_operations SET state = ?3, last_error = NULLIF(?4, ''), finished_at = ?5, updated_at = ?5,
			lease_owner = NULL, lease_expires_at = NULL
		WHERE id = ?1 AND lease_owner = ?2 AND state = 'RUNNING'`,
	Release:       `UPDATE dlq_operations SET lease_owner = NULL, lease_expires_at = NULL WHERE id = ?1 AND lease_owner = ?2 AND state = 'RUNNING'`,
	LockForCancel: `SELECT state, lease_owner IS NOT NULL AND lease_expires_at >= ?2 FROM dlq_operations WHERE id = ?1`,
	RequestCancel: `
		UPDATE dlq_operations SET cancel_requested_at = COALESCE(cancel_requested_at, ?3),
			cancelled_by_uid = COALESCE(cancelled_by_uid, ?2), updated_at = ?3 WHERE id = ?1`,
	CancelNow: `
		UPDATE dlq_operations SET state = 'CANCELLED', cancel_requested_at = COALESCE(cancel_requested_at, ?3),
			cancelled_by_uid = COALESCE(cancelled_by_uid, ?2), finished_at = ?3, updated_at = ?3, lease_owner = NULL,
			lease_expires_at = NULL WHERE id = ?1`,
	CancelRequested: `SELECT cancel_requested_at IS NOT NULL FROM dlq_operations WHERE id = ?1`,
	ClaimIDs: `
		UPDATE dlq_messages SET status = 'RETRYING', last_retry_at = ?2, lease_owner = ?3,
			lease_expires_at = ` + sqliteLeaseEnd("?4", "?7") + `, updated_at = ?2
		WHERE id IN (SELECT value FROM json_each(?1)) AND ` + sqlstore.Retryable + ` AND (status = 'PENDING' OR (lease_expires_at < ?2 AND lease_owner IS NOT ?3))
			AND id NOT IN (SELECT message_id FROM dlq_operation_items WHERE operation_id = ?5
				AND seq IN (SELECT value FROM json_each(?6)) AND answered IS NOT NULL)
		RETURNING ` + sqlstore.DLQColumns,
	TopicOf: `SELECT dlq_topic FROM dlq_messages WHERE id = ?1`,
	SetStatusIf: `
		UPDATE dlq_messages SET status = ?3, next_retry_at = NULL, updated_at = ?2
		WHERE id = ?1 AND status IN (SELECT value FROM json_each(?4))`,
}
