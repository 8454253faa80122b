package sqlite

import "github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"

const sqliteResurrectionColumns = `id, tenant_id, erasure_job_id, receipt_sha256, counts, found_at, last_seen_at, seen_count,
	resolved_at, action, COALESCE(reerase_job_id, '')`

var sqliteLedger = sqlstore.LedgerSQL{
	Record: `
		INSERT INTO erasure_ledger (job_id, tenant_id, erased_at, receipt_sha256, source, recorded_at)
		SELECT id, tenant_id, ?2, ?3, 'local', ?2 FROM deletion_jobs WHERE id = ?1
		ON CONFLICT (job_id) DO NOTHING`,
	Entries: `
		SELECT job_id, tenant_id, erased_at, receipt_sha256, source, recorded_at FROM erasure_ledger
		ORDER BY erased_at, job_id`,
	ImportEntry: `
		INSERT INTO erasure_ledger (job_id, tenant_id, erased_at, receipt_sha256, source, recorded_at)
		VALUES (?1, ?2, ?3, ?4, 'import', ?5) ON CONFLICT (job_id) DO NOTHING`,
	Tenants: `
		SELECT l.tenant_id, l.job_id, l.receipt_sha256,
			EXISTS (SELECT 1 FROM deletion_jobs j WHERE j.tenant_id = l.tenant_id AND j.status NOT IN ('COMPLETED', 'CANCELLED'))
		FROM erasure_ledger l
		WHERE l.tenant_id > ?1 AND l.job_id = (SELECT l2.job_id FROM erasure_ledger l2 WHERE l2.tenant_id = l.tenant_id
			ORDER BY l2.erased_at DESC, l2.job_id DESC LIMIT 1)
		ORDER BY l.tenant_id LIMIT ?2`,
	Acquire: `
		UPDATE erasure_reverify SET owner = ?1, lease_expires_at = ?3, last_started_at = ?2
		WHERE name = 'reverify' AND (owner IS NULL OR owner = ?1 OR lease_expires_at < ?2)
			AND (?5 OR last_finished_at IS NULL OR last_finished_at <= ?4)`,
	Renew: `UPDATE erasure_reverify SET lease_expires_at = ?2 WHERE name = 'reverify' AND owner = ?1`,
	Release: `
		UPDATE erasure_reverify SET owner = NULL, lease_expires_at = NULL,
			last_finished_at = CASE WHEN ?3 THEN ?2 ELSE last_finished_at END
		WHERE name = 'reverify' AND owner = ?1`,
	OpenResurrection: `SELECT ` + sqliteResurrectionColumns + ` FROM erasure_resurrections WHERE tenant_id = ?1 AND resolved_at IS NULL`,
	InsertResurrection: `
		INSERT INTO erasure_resurrections (id, tenant_id, erasure_job_id, receipt_sha256, counts, found_at, last_seen_at, action, reerase_job_id)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7, ?8)`,
	UpdateResurrection: `
		UPDATE erasure_resurrections SET counts = ?2, last_seen_at = ?3, seen_count = seen_count + 1,
			action = ?4, reerase_job_id = COALESCE(?5, reerase_job_id)
		WHERE id = ?1`,
	Resolve: `UPDATE erasure_resurrections SET resolved_at = ?2 WHERE tenant_id = ?1 AND resolved_at IS NULL`,
	List:    `SELECT ` + sqliteResurrectionColumns + ` FROM erasure_resurrections WHERE tenant_id = ?1 ORDER BY found_at DESC, id DESC`,
	ReerasureOf: `
		SELECT erasure_job_id, receipt_sha256 FROM erasure_resurrections WHERE reerase_job_id = ?1
		ORDER BY found_at DESC LIMIT 1`,
}
