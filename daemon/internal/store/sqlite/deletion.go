package sqlite

import "github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"

// sqliteHeld is whether the tenant of the job row j is under a legal hold.
const sqliteHeld = `EXISTS (SELECT 1 FROM tenant_holds h WHERE h.tenant_id = j.tenant_id AND h.released_at IS NULL)`

// sqliteJobSelect selects jobs from deletion_jobs j, for scanJob.
const sqliteJobSelect = `SELECT ` + sqlstore.JobColumns + `, ` + sqliteHeld + ` FROM deletion_jobs j`

var sqliteJobs = sqlstore.JobSQL{
	Create: `
		INSERT INTO deletion_jobs (id, tenant_id, status, created_at, updated_at, next_attempt_at, not_before, requested_by_uid)
		VALUES (?1, ?2, ?3, ?4, ?4, ?5, ?6, ?7) ON CONFLICT (tenant_id) WHERE status NOT IN ('COMPLETED', 'CANCELLED') DO NOTHING`,
	AddDeleter: `INSERT INTO deletion_job_deleters (job_id, deleter, status, updated_at) VALUES (?1, ?2, 'PENDING', ?3)`,
	Active:     sqliteJobSelect + ` WHERE tenant_id = ?1 AND status NOT IN ('COMPLETED', 'CANCELLED')`,
	Latest:     sqliteJobSelect + ` WHERE tenant_id = ?1 ORDER BY created_at DESC, id DESC LIMIT 1`,
	ByID:       sqliteJobSelect + ` WHERE id = ?1`,
	// One daemon owns a SQLite file, and its one connection makes every
	// transaction serial: no other claimer to skip or to lock out.
	Claim: `
		UPDATE deletion_jobs SET status = 'RUNNING', attempts = attempts + 1, lease_owner = ?2, lease_expires_at = ?3,
			updated_at = ?1, started_at = COALESCE(started_at, ?1)
		WHERE id = (SELECT j.id FROM deletion_jobs j
			WHERE ((j.status IN ('SCHEDULED', 'PENDING', 'PARTIAL') AND j.next_attempt_at <= ?1)
					OR (j.status = 'RUNNING' AND j.lease_expires_at < ?1))
				AND j.cancel_requested_at IS NULL
				AND NOT ` + sqliteHeld + `
				AND (?4 <= 0 OR (SELECT count(*) FROM deletion_jobs r WHERE r.status = 'RUNNING' AND r.lease_expires_at >= ?1) < ?4)
			ORDER BY j.next_attempt_at, j.created_at LIMIT 1)
		RETURNING ` + sqlstore.JobColumns + `, FALSE`,
	Renew:   `UPDATE deletion_jobs SET lease_expires_at = ?3 WHERE id = ?1 AND lease_owner = ?2 AND status = 'RUNNING'`,
	Control: `SELECT cancel_requested_at IS NOT NULL, ` + sqliteHeld + ` FROM deletion_jobs j WHERE id = ?1`,
	SetDeleter: `
		INSERT INTO deletion_job_deleters (job_id, deleter, status, deleted_count, initial_count, attempts, error,
			updated_at, breakdown, verification)
		SELECT ?1, ?3, ?4, ?5, NULLIF(?9, -1), ?6, NULLIF(?7, ''), ?8, ?10, ?11
		FROM deletion_jobs j WHERE j.id = ?1 AND j.lease_owner = ?2 AND j.status = 'RUNNING'
		ON CONFLICT (job_id, deleter) DO UPDATE SET status = excluded.status, deleted_count = excluded.deleted_count,
			initial_count = excluded.initial_count, attempts = excluded.attempts, error = excluded.error,
			updated_at = excluded.updated_at, breakdown = excluded.breakdown, verification = excluded.verification`,
	Finish: `
		UPDATE deletion_jobs SET
			status = CASE WHEN cancel_requested_at IS NOT NULL AND ?3 <> 'COMPLETED' THEN 'CANCELLED' ELSE ?3 END,
			verified = ?4, last_error = NULLIF(?5, ''),
			next_attempt_at = CASE WHEN cancel_requested_at IS NOT NULL AND ?3 <> 'COMPLETED' THEN NULL ELSE ?6 END,
			finished_at = CASE WHEN ?3 IN ('COMPLETED', 'CANCELLED') OR cancel_requested_at IS NOT NULL THEN ?7 END,
			updated_at = ?7, lease_owner = NULL, lease_expires_at = NULL
		WHERE id = ?1 AND lease_owner = ?2 AND status = 'RUNNING'
		RETURNING status`,
	DeletersFor: `SELECT ` + sqlstore.DeleterColumns + ` FROM deletion_job_deleters WHERE job_id = ?1 ORDER BY deleter`,
	DeletersOf: `
		SELECT job_id, ` + sqlstore.DeleterColumns + ` FROM deletion_job_deleters
		WHERE job_id IN (SELECT value FROM json_each(?1)) ORDER BY job_id, deleter`,
	List: sqliteJobSelect + `
		WHERE (?1 = '' OR tenant_id = ?1)
			AND (?2 = '[]' OR ` + sqlstore.JobStatusExpr + ` IN (SELECT value FROM json_each(?2)))
			AND (?3 IS NULL OR created_at >= ?3)
			AND (?4 IS NULL OR created_at < ?4)
			AND (?5 IS NULL OR (created_at, id) < (?5, ?6))
		ORDER BY created_at DESC, id DESC LIMIT ?7`,
	CancelNow: `
		UPDATE deletion_jobs SET status = 'CANCELLED', finished_at = ?3, updated_at = ?3,
			cancel_requested_at = ?3, cancelled_by_uid = ?2, lease_owner = NULL, lease_expires_at = NULL, next_attempt_at = NULL
		WHERE tenant_id = ?1 AND (status IN ('SCHEDULED', 'PENDING', 'PARTIAL', 'BLOCKED') OR (status = 'RUNNING' AND lease_expires_at < ?3))
		RETURNING id`,
	CancelRunning: `UPDATE deletion_job_deleters SET status = 'CANCELLED', updated_at = ?2 WHERE job_id = ?1 AND status = 'RUNNING'`,
	CancelRequest: `
		UPDATE deletion_jobs SET cancel_requested_at = COALESCE(cancel_requested_at, ?3),
			cancelled_by_uid = COALESCE(cancelled_by_uid, ?2), updated_at = ?3
		WHERE tenant_id = ?1 AND status = 'RUNNING'
		RETURNING id`,
	RetryJob: `
		UPDATE deletion_jobs SET status = 'PARTIAL', next_attempt_at = ?2, updated_at = ?2
		WHERE tenant_id = ?1 AND status IN ('BLOCKED', 'PARTIAL') AND cancel_requested_at IS NULL
		RETURNING id`,
	RetryDeleters: `UPDATE deletion_job_deleters SET status = 'PENDING', updated_at = ?2 WHERE job_id = ?1 AND status = 'BLOCKED'`,
	Reap: `
		UPDATE deletion_jobs SET status = 'CANCELLED', finished_at = ?1, updated_at = ?1, lease_owner = NULL,
			lease_expires_at = NULL, next_attempt_at = NULL
		WHERE status = 'RUNNING' AND cancel_requested_at IS NOT NULL AND lease_expires_at < ?1`,
	StatusCounts: `SELECT ` + sqlstore.JobStatusExpr + `, count(*) FROM deletion_jobs GROUP BY 1`,
	Overdue: `
		SELECT min(not_before) FROM deletion_jobs j
		WHERE status = 'SCHEDULED' AND next_attempt_at <= ?1 AND NOT ` + sqliteHeld,
	HeldJobs:    `SELECT count(*) FROM deletion_jobs j WHERE status NOT IN ('COMPLETED', 'CANCELLED') AND ` + sqliteHeld,
	ActiveHolds: `SELECT count(*) FROM tenant_holds WHERE released_at IS NULL`,
}
