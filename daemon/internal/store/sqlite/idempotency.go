package sqlite

import "github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"

var sqliteKeys = sqlstore.KeySQL{
	Reserve: `
		INSERT INTO idempotency_keys (caller_uid, key, route, request_hash, state, created_at, locked_at, expires_at)
		VALUES (?1, ?2, ?3, ?4, 'IN_FLIGHT', ?5, ?5, ?6)
		ON CONFLICT (caller_uid, key) DO UPDATE SET route = excluded.route, request_hash = excluded.request_hash,
			state = 'IN_FLIGHT', response_status = NULL, response_body = NULL, response_headers = NULL, created_at = excluded.created_at,
			locked_at = excluded.locked_at, expires_at = excluded.expires_at
		WHERE expires_at <= ?5 OR (state = 'IN_FLIGHT' AND locked_at < ?7)`,
	Holder: `SELECT ` + sqlstore.KeyColumns + ` FROM idempotency_keys WHERE caller_uid = ?1 AND key = ?2`,
	Complete: `
		UPDATE idempotency_keys SET state = 'DONE', response_status = ?4, response_body = ?5, expires_at = ?6, response_headers = ?7
		WHERE caller_uid = ?1 AND key = ?2 AND request_hash = ?3 AND state = 'IN_FLIGHT'`,
	Release: `
		DELETE FROM idempotency_keys WHERE caller_uid = ?1 AND key = ?2 AND request_hash = ?3 AND state = 'IN_FLIGHT'`,
}
