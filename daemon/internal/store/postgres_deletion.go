package store

// pgHeld is whether the tenant of the job row j is under a legal hold.
const pgHeld = `EXISTS (SELECT 1 FROM lifecycle.tenant_holds h WHERE h.tenant_id = j.tenant_id AND h.released_at IS NULL)`

// pgJobSelect selects jobs from lifecycle.deletion_jobs j, for scanJob.
const pgJobSelect = `SELECT ` + jobColumns + `, ` + pgHeld + ` FROM lifecycle.deletion_jobs j`

var pgJobs = jobSQL{
	create: `
		INSERT INTO lifecycle.deletion_jobs (id, tenant_id, status, created_at, updated_at, next_attempt_at, not_before, requested_by_uid)
		VALUES ($1, $2, $3, $4, $4, $5, $6, $7) ON CONFLICT (tenant_id) WHERE status NOT IN ('COMPLETED', 'CANCELLED') DO NOTHING`,
	addDeleter: `
		INSERT INTO lifecycle.deletion_job_deleters (job_id, deleter, status, updated_at) VALUES ($1, $2, 'PENDING', $3)`,
	active: pgJobSelect + ` WHERE tenant_id = $1 AND status NOT IN ('COMPLETED', 'CANCELLED')`,
	latest: pgJobSelect + ` WHERE tenant_id = $1 ORDER BY created_at DESC, id DESC LIMIT 1`,
	byID:   pgJobSelect + ` WHERE id = $1`,
	// Serialises claims when max_jobs counts live leases across the
	// daemons sharing this database; the key spells "lcd-dlj".
	claimLock: `SELECT pg_advisory_xact_lock(30508579394186346)`,
	claim: `
		WITH due AS (
			SELECT j.id AS due_id FROM lifecycle.deletion_jobs j
			WHERE ((j.status IN ('SCHEDULED', 'PENDING', 'PARTIAL') AND j.next_attempt_at <= $1)
					OR (j.status = 'RUNNING' AND j.lease_expires_at < $1))
				AND j.cancel_requested_at IS NULL
				AND NOT ` + pgHeld + `
				AND ($4 <= 0 OR (SELECT count(*) FROM lifecycle.deletion_jobs r
					WHERE r.status = 'RUNNING' AND r.lease_expires_at >= $1) < $4)
			ORDER BY j.next_attempt_at NULLS FIRST, j.created_at LIMIT 1 FOR UPDATE OF j SKIP LOCKED
		)
		UPDATE lifecycle.deletion_jobs SET status = 'RUNNING', attempts = attempts + 1, lease_owner = $2,
			lease_expires_at = $3, updated_at = $1, started_at = COALESCE(started_at, $1)
		FROM due WHERE id = due_id
		RETURNING ` + jobColumns + `, FALSE`,
	renew: `
		UPDATE lifecycle.deletion_jobs SET lease_expires_at = $3 WHERE id = $1 AND lease_owner = $2 AND status = 'RUNNING'`,
	control: `SELECT cancel_requested_at IS NOT NULL, ` + pgHeld + ` FROM lifecycle.deletion_jobs j WHERE id = $1`,
	setDeleter: `
		INSERT INTO lifecycle.deletion_job_deleters AS d (job_id, deleter, status, deleted_count, initial_count, attempts,
			error, updated_at, breakdown, verification)
		SELECT $1, $3, $4, $5, NULLIF($9, -1), $6, NULLIF($7, ''), $8, $10::jsonb, $11::jsonb
		FROM lifecycle.deletion_jobs j WHERE j.id = $1 AND j.lease_owner = $2 AND j.status = 'RUNNING'
		ON CONFLICT (job_id, deleter) DO UPDATE SET status = EXCLUDED.status, deleted_count = EXCLUDED.deleted_count,
			initial_count = EXCLUDED.initial_count, attempts = EXCLUDED.attempts, error = EXCLUDED.error,
			updated_at = EXCLUDED.updated_at, breakdown = EXCLUDED.breakdown, verification = EXCLUDED.verification`,
	// A cancel requested during the attempt wins over anything but
	// COMPLETED: the job is never handed back to run again.
	finish: `
		UPDATE lifecycle.deletion_jobs SET
			status = CASE WHEN cancel_requested_at IS NOT NULL AND $3::text <> 'COMPLETED' THEN 'CANCELLED' ELSE $3::text END,
			verified = $4, last_error = NULLIF($5, ''),
			next_attempt_at = CASE WHEN cancel_requested_at IS NOT NULL AND $3::text <> 'COMPLETED' THEN NULL ELSE $6::timestamptz END,
			finished_at = CASE WHEN $3::text IN ('COMPLETED', 'CANCELLED') OR cancel_requested_at IS NOT NULL THEN $7::timestamptz END,
			updated_at = $7, lease_owner = NULL, lease_expires_at = NULL
		WHERE id = $1 AND lease_owner = $2 AND status = 'RUNNING'
		RETURNING status`,
	deletersFor: `SELECT ` + deleterColumns + ` FROM lifecycle.deletion_job_deleters WHERE job_id = $1 ORDER BY deleter`,
	deletersOf: `
		SELECT job_id, ` + deleterColumns + ` FROM lifecycle.deletion_job_deleters
		WHERE job_id IN (SELECT jsonb_array_elements_text($1::jsonb)::uuid) ORDER BY job_id, deleter`,
	list: pgJobSelect + `
		WHERE ($1::text = '' OR tenant_id = $1)
			AND ($2::jsonb = '[]'::jsonb OR status IN (SELECT jsonb_array_elements_text($2::jsonb)))
			AND ($3::timestamptz IS NULL OR created_at >= $3)
			AND ($4::timestamptz IS NULL OR created_at < $4)
			AND ($5::timestamptz IS NULL OR (created_at, id) < ($5, $6::uuid))
		ORDER BY created_at DESC, id DESC LIMIT $7`,
	cancelNow: `
		UPDATE lifecycle.deletion_jobs SET status = 'CANCELLED', finished_at = $3, updated_at = $3,
			cancel_requested_at = $3, cancelled_by_uid = $2, lease_owner = NULL, lease_expires_at = NULL, next_attempt_at = NULL
		WHERE tenant_id = $1 AND (status IN ('SCHEDULED', 'PENDING', 'PARTIAL', 'BLOCKED') OR (status = 'RUNNING' AND lease_expires_at < $3))
		RETURNING id`,
	cancelRunning: `
		UPDATE lifecycle.deletion_job_deleters SET status = 'CANCELLED', updated_at = $2 WHERE job_id = $1 AND status = 'RUNNING'`,
	cancelRequest: `
		UPDATE lifecycle.deletion_jobs SET cancel_requested_at = COALESCE(cancel_requested_at, $3),
			cancelled_by_uid = COALESCE(cancelled_by_uid, $2), updated_at = $3
		WHERE tenant_id = $1 AND status = 'RUNNING'
		RETURNING id`,
	retryJob: `
		UPDATE lifecycle.deletion_jobs SET status = 'PARTIAL', next_attempt_at = $2, updated_at = $2
		WHERE tenant_id = $1 AND status IN ('BLOCKED', 'PARTIAL') AND cancel_requested_at IS NULL
		RETURNING id`,
	retryDeleters: `UPDATE lifecycle.deletion_job_deleters SET status = 'PENDING', updated_at = $2 WHERE job_id = $1 AND status = 'BLOCKED'`,
	reap: `
		UPDATE lifecycle.deletion_jobs SET status = 'CANCELLED', finished_at = $1, updated_at = $1, lease_owner = NULL,
			lease_expires_at = NULL, next_attempt_at = NULL
		WHERE status = 'RUNNING' AND cancel_requested_at IS NOT NULL AND lease_expires_at < $1`,
	statusCounts: `SELECT status, count(*) FROM lifecycle.deletion_jobs GROUP BY status`,
	overdue: `
		SELECT min(not_before) FROM lifecycle.deletion_jobs j
		WHERE status = 'SCHEDULED' AND next_attempt_at <= $1 AND NOT ` + pgHeld,
	heldJobs:    `SELECT count(*) FROM lifecycle.deletion_jobs j WHERE status NOT IN ('COMPLETED', 'CANCELLED') AND ` + pgHeld,
	activeHolds: `SELECT count(*) FROM lifecycle.tenant_holds WHERE released_at IS NULL`,
}
