package store

var sqliteJobs = jobSQL{
	create: `
		INSERT INTO deletion_jobs (id, tenant_id, status, created_at, updated_at, next_attempt_at)
		VALUES (?1, ?2, 'PENDING', ?3, ?3, ?3) ON CONFLICT (tenant_id) WHERE status <> 'COMPLETED' DO NOTHING`,
	addDeleter: `INSERT INTO deletion_job_deleters (job_id, deleter, status, updated_at) VALUES (?1, ?2, 'PENDING', ?3)`,
	active:     `SELECT ` + jobColumns + ` FROM deletion_jobs WHERE tenant_id = ?1 AND status <> 'COMPLETED'`,
	latest: `
		SELECT ` + jobColumns + ` FROM deletion_jobs WHERE tenant_id = ?1 ORDER BY created_at DESC, id DESC LIMIT 1`,
	// One daemon owns a SQLite file: no other claimer to skip.
	claim: `
		UPDATE deletion_jobs SET status = 'RUNNING', attempts = attempts + 1, lease_owner = ?2, lease_expires_at = ?3,
			updated_at = ?1
		WHERE id = (SELECT id FROM deletion_jobs
			WHERE (status IN ('PENDING', 'PARTIAL') AND next_attempt_at <= ?1) OR (status = 'RUNNING' AND lease_expires_at < ?1)
			ORDER BY next_attempt_at, created_at LIMIT 1)
		RETURNING ` + jobColumns,
	renew: `UPDATE deletion_jobs SET lease_expires_at = ?3 WHERE id = ?1 AND lease_owner = ?2 AND status = 'RUNNING'`,
	setDeleter: `
		INSERT INTO deletion_job_deleters (job_id, deleter, status, deleted_count, initial_count, attempts, error,
			updated_at, breakdown, verification)
		SELECT ?1, ?3, ?4, ?5, NULLIF(?9, -1), ?6, NULLIF(?7, ''), ?8, ?10, ?11
		FROM deletion_jobs j WHERE j.id = ?1 AND j.lease_owner = ?2 AND j.status = 'RUNNING'
		ON CONFLICT (job_id, deleter) DO UPDATE SET status = excluded.status, deleted_count = excluded.deleted_count,
			initial_count = excluded.initial_count, attempts = excluded.attempts, error = excluded.error,
			updated_at = excluded.updated_at, breakdown = excluded.breakdown, verification = excluded.verification`,
	finish: `
		UPDATE deletion_jobs SET status = ?3, verified = ?4, last_error = NULLIF(?5, ''), next_attempt_at = ?6,
			finished_at = ?7, updated_at = ?8, lease_owner = NULL, lease_expires_at = NULL
		WHERE id = ?1 AND lease_owner = ?2 AND status = 'RUNNING'`,
	deletersFor: `SELECT ` + deleterColumns + ` FROM deletion_job_deleters WHERE job_id = ?1 ORDER BY deleter`,
}
