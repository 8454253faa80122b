package postgres

import "github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"

var pgOps = sqlstore.OpSQL{
	Insert: `
		INSERT INTO dlq.dlq_operations (id, action, state, filter, target_topic, rate, created_at, updated_at, requested_by_uid,
			lease_owner, lease_expires_at, started_at)
		VALUES ($1, $2, 'RUNNING', $3::jsonb, $4, $5, $6, $6, $7, $8::text, $9, CASE WHEN $8::text IS NULL THEN NULL ELSE $6::timestamptz END)`,
	ItemsOfIDs: `
		INSERT INTO dlq.dlq_operation_items (operation_id, seq, message_id)
		SELECT $2, row_number() OVER (ORDER BY created_at, id), id FROM dlq.dlq_messages WHERE id = ANY($1::uuid[])`,
	CountIDs:    `SELECT count(*) FROM dlq.dlq_messages WHERE id = ANY($1::uuid[])`,
	ItemsPrefix: `INSERT INTO dlq.dlq_operation_items (operation_id, seq, message_id) `,
	SetMatched:  `UPDATE dlq.dlq_operations SET matched = $2 WHERE id = $1`,
	Get:         `SELECT ` + sqlstore.OpColumns + ` FROM dlq.dlq_operations WHERE id = $1`,
	List:        `SELECT ` + sqlstore.OpColumns + ` FROM dlq.dlq_operations WHERE ($2 = FALSE OR state = 'RUNNING') ORDER BY created_at DESC, id DESC LIMIT $1`,
	Claim: `
		UPDATE dlq.dlq_operations SET lease_owner = $2, lease_expires_at = $3, started_at = COALESCE(started_at, $1), updated_at = $1
		WHERE id = (SELECT id FROM dlq.dlq_operations WHERE state = 'RUNNING' AND (lease_expires_at IS NULL OR lease_expires_at < $1)
			ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
		RETURNING ` + sqlstore.OpColumns,
	Renew:        `UPDATE dlq.dlq_operations SET lease_expires_at = $3 WHERE id = $1 AND lease_owner = $2 AND state = 'RUNNING'`,
	Items:        `SELECT seq, message_id FROM dlq.dlq_operation_items WHERE operation_id = $1 AND seq > $2 AND seq <= $2 + $3 ORDER BY seq LIMIT $3`,
	Failures:     `SELECT seq, message_id, outcome, COALESCE(error, '') FROM dlq.dlq_operation_items WHERE operation_id = $1 AND outcome IS NOT NULL ORDER BY seq LIMIT $2`,
	LockProgress: `SELECT position, outcomes, done_ranges, COALESCE(lease_owner, ''), state FROM dlq.dlq_operations WHERE id = $1 FOR UPDATE`,
	AllAnswered: `SELECT seq, answered, COALESCE(answered_error, '') FROM dlq.dlq_operation_items
		WHERE operation_id = $1 AND answered IS NOT NULL ORDER BY seq`,
	Advance: `
		UPDATE dlq.dlq_operations SET position = $2, done = done + $3, succeeded = succeeded + $4, failed = failed + $5,
			outcomes = $6::jsonb, updated_at = $7, done_ranges = $8::jsonb WHERE id = $1`,
	Answered: `SELECT seq, answered, COALESCE(answered_error, '') FROM dlq.dlq_operation_items
		WHERE operation_id = $1 AND seq = ANY(ARRAY(SELECT jsonb_array_elements_text($2::jsonb)::bigint)) AND answered IS NOT NULL`,
	MarkAnswered: `UPDATE dlq.dlq_operation_items SET answered = $3, answered_error = NULLIF($4, '') WHERE operation_id = $1 AND seq = $2`,
	ItemFailed:   `UPDATE dlq.dlq_operation_items SET outcome = $3, error = NULLIF($4, '') WHERE operation_id = $1 AND seq = $2`,
	Finish: `
		UPDATE dlq.dlq_operations SET state = $3, last_error = NULLIF($4, ''), finished_at = $5, updated_at = $5,
			lease_owner = NULL, lease_expires_at = NULL
		WHERE id = $1 AND lease_owner = $2 AND state = 'RUNNING'`,
	Release:       `UPDATE dlq.dlq_operations SET lease_owner = NULL, lease_expires_at = NULL WHERE id = $1 AND lease_owner = $2 AND state = 'RUNNING'`,
	LockForCancel: `SELECT state, lease_owner IS NOT NULL AND lease_expires_at >= $2 FROM dlq.dlq_operations WHERE id = $1 FOR UPDATE`,
	RequestCancel: `
		UPDATE dlq.dlq_operations SET cancel_requested_at = COALESCE(cancel_requested_at, $3),
			cancelled_by_uid = COALESCE(cancelled_by_uid, $2), updated_at = $3 WHERE id = $1`,
	CancelNow: `
		UPDATE dlq.dlq_operations SET state = 'CANCELLED', cancel_requested_at = COALESCE(cancel_requested_at, $3),
			cancelled_by_uid = COALESCE(cancelled_by_uid, $2), finished_at = $3, updated_at = $3, lease_owner = NULL,
			lease_expires_at = NULL WHERE id = $1`,
	CancelRequested: `SELECT cancel_requested_at IS NOT NULL FROM dlq.dlq_operations WHERE id = $1`,
	TopicOf:         `SELECT dlq_topic FROM dlq.dlq_messages WHERE id = $1`,
	LockPage:        `SELECT id FROM dlq.dlq_messages WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE`,
	SetStatusIf: `
		UPDATE dlq.dlq_messages SET status = $3, next_retry_at = NULL, updated_at = $2
		WHERE id = $1 AND status = ANY($4::text[])`,
}
