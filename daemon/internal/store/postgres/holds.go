package postgres

import "github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"

var pgHolds = sqlstore.HoldSQL{
	Place: `
		INSERT INTO lifecycle.tenant_holds (id, tenant_id, reason, held_at, held_by_uid) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (tenant_id) WHERE released_at IS NULL DO NOTHING`,
	Release: `
		UPDATE lifecycle.tenant_holds SET released_at = $3, released_by_uid = $2
		WHERE tenant_id = $1 AND released_at IS NULL
		RETURNING ` + sqlstore.HoldColumns,
	Active: `SELECT ` + sqlstore.HoldColumns + ` FROM lifecycle.tenant_holds WHERE tenant_id = $1 AND released_at IS NULL`,
	List: `
		SELECT ` + sqlstore.HoldColumns + ` FROM lifecycle.tenant_holds
		WHERE ($1::boolean OR released_at IS NULL)
			AND ($2::text = '' OR tenant_id = $2)
			AND ($3::timestamptz IS NULL OR (held_at, id) < ($3, $4::uuid))
		ORDER BY held_at DESC, id DESC LIMIT $5`,
}
