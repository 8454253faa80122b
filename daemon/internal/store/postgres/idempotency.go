package postgres

import "github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"

var pgKeys = sqlstore.KeySQL{
	Reserve: `
		INSERT INTO lifecycle.idempotency_keys AS k (caller_uid, key, route, request_hash, state, created_at, locked_at,
			expires_at)
		VALUES ($1, $2, $3, $4, 'IN_FLIGHT', $5, $5, $6)
		ON CONFLICT (caller_uid, key) DO UPDATE SET route = EXCLUDED.route, request_hash = EXCLUDED.request_hash,
			state = 'IN_FLIGHT', response_status = NULL, response_body = NULL, response_headers = NULL, created_at = EXCLUDED.created_at,
			locked_at = EXCLUDED.locked_at, expires_at = EXCLUDED.expires_at
		WHERE k.expires_at <= $5 OR (k.state = 'IN_FLIGHT' AND k.locked_at < $7)`,
	Holder: `SELECT ` + sqlstore.KeyColumns + ` FROM lifecycle.idempotency_keys WHERE caller_uid = $1 AND key = $2`,
	Complete: `
		UPDATE lifecycle.idempotency_keys SET state = 'DONE', response_status = $4, response_body = $5, expires_at = $6, response_headers = $7
		WHERE caller_uid = $1 AND key = $2 AND request_hash = $3 AND state = 'IN_FLIGHT'`,
	Release: `
		DELETE FROM lifecycle.idempotency_keys
		WHERE caller_uid = $1 AND key = $2 AND request_hash = $3 AND state = 'IN_FLIGHT'`,
}
