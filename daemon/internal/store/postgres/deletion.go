package postgres

import "github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"

// pgHeld is whether the tenant of the job row j is under a legal hold.
const pgHeld = `EXISTS (SELECT 1 FROM lifecycle.tenant_holds h WHERE h.tenant_id = j.tenant_id AND h.released_at IS NULL)`

// pgJobSelect selects jobs from lifecycle.deletion_jobs j, for scanJob.
const pgJobSelect = `SELECT ` + sqlstore.JobColumns + `, ` + pgHeld + ` FROM lifecycle.deletion_jobs j`

var pgJobs = sqlstore.JobSQL{
	Create: `
		INSERT INTO lifecycle.deletion_jobs (id, tenant_id, status, created_at, updated_at, next_attempt_at, not_before, requested_by_uid)
		VALUES ($1, $2, $3, $4, $4, $5, $6, $7) ON CONFLICT (tenant_id) WHERE status NOT IN ('COMPLETED', 'CANCELLED') DO NOTHING`,
	AddDeleter: `
		INSERT INTO lifecycle.deletion_job_deleters (job_id, deleter, status, updated_at) VALUES ($1, $2, 'PENDING', $3)`,
	Active: pgJobSelect + ` WHERE tenant_id = $1 AND status NOT IN ('COMPLETED', 'CANCELLED')`,
	Latest: pgJobSelect + ` WHERE tenant_id = $1 ORDER BY created_at DESC, id DESC LIMIT 1`,
	ByID:   pgJobSelect + ` WHERE id = $1`,
	// Serialises claims when max_jobs counts live leases across the
	// daemons sharing this database; the key spells "lcd-dlj".
	ClaimLock: `SELECT pg_advisory_xact_lock(30508579394186346)`,
	Claim: `
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
		RETURNING ` + sqlstore.JobColumns + `, FALSE`,
	Renew: `
		UPDATE lifecycle.deletion_jobs SET lease_expires_at = $3 WHERE id = $1 AND lease_owner = $2 AND status = 'RUNNING'`,
	Control: `SELECT cancel_requested_at IS NOT NULL, ` + pgHeld + ` FROM lifecycle.deletion_jobs j WHERE id = $1`,
	SetDeleter: `
		INSERT INTO lifecycle.deletion_job_deleters AS d (job_id, deleter, status, deleted_count, initial_count, attempts,
			error, updated_at, breakdown, verification)
		SELECT $1, $3, $4, $5, NULLIF($9, -1), $6, NULLIF($7, ''), $8, $10::jsonb, $11::jsonb
		FROM lifecycle.deletion_jobs j WHERE j.id = $1 AND j.lease_owner = $2 AND j.status = 'RUNNING'
		ON CONFLICT (job_id, deleter) DO UPDATE SET status = EXCLUDED.status, deleted_count = EXCLUDED.deleted_count,
			initial_count = EXCLUDED.initial_count, attempts = EXCLUDED.attempts, error = EXCLUDED.error,
			updated_at = EXCLUDED.updated_at, breakdown = EXCLUDED.breakdown, verification = EXCLUDED.verification`,
	// A cancel requested during the attempt wins over anything but
	// COMPLETED: the job is never handed back to run again.
	Finish: `
		UPDATE lifecycle.deletion_jobs SET
			status = CASE WHEN cancel_requested_at IS NOT NULL AND $3::text <> 'COMPLETED' THEN 'CANCELLED' ELSE $3::text END,
			verified = $4, last_error = NULLIF($5, ''),
			next_attempt_at = CASE WHEN cancel_requested_at IS NOT NULL AND $3::text <> 'COMPLETED' THEN NULL ELSE $6::timestamptz END,
			finished_at = CASE WHEN $3::text IN ('COMPLETED', 'CANCELLED') OR cancel_requested_at IS NOT NULL THEN $7::timestamptz END,
			updated_at = $7, lease_owner = NULL, lease_expires_at = NULL
		WHERE id = $1 AND lease_owner = $2 AND status = 'RUNNING'
		RETURNING status`,
	DeletersFor: `SELECT ` + sqlstore.DeleterColumns + ` FROM lifecycle.deletion_job_deleters WHERE job_id = $1 ORDER BY deleter`,
	DeletersOf: `
		SELECT job_id, ` + sqlstore.DeleterColumns + ` FROM lifecycle.deletion_job_deleters
		WHERE job_id IN (SELECT jsonb_array_elements_text($1::jsonb)::uuid) ORDER BY job_id, deleter`,
	List: pgJobSelect + `
		WHERE ($1::text = '' OR tenant_id = $1)
			AND ($2::jsonb = '[]'::jsonb OR ` + sqlstore.JobStatusExpr + ` IN (SELECT jsonb_array_elements_text($2::jsonb)))
			AND ($3::timestamptz IS NULL OR created_at >= $3)
			AND ($4::timestamptz IS NULL OR created_at < $4)
			AND ($5::timestamptz IS NULL OR (created_at, id) < ($5, $6::uuid))
		ORDER BY created_at DESC, id DESC LIMIT $7`,
	CancelNow: `
		UPDATE lifecycle.deletion_jobs SET status = 'CANCELLED', finished_at = $3, updated_at = $3,
			cancel_requested_at = $3, cancelled_by_uid = $2, lease_owner = NULL, lease_expires_at = NULL, next_attempt_at = NULL
		WHERE tenant_id = $1 AND (status IN ('SCHEDULED', 'PENDING', 'PARTIAL', 'BLOCKED') OR (status = 'RUNNING' AND lease_expires_at < $3))
		RETURNING id`,
	CancelRunning: `
		UPDATE lifecycle.deletion_job_deleters SET status = 'CANCELLED', updated_at = $2 WHERE job_id = $1 AND status = 'RUNNING'`,
	CancelRequest: `
		UPDATE lifecycle.deletion_jobs SET cancel_requested_at = COALESCE(cancel_requested_at, $3),
			cancelled_by_uid = COALESCE(cancelled_by_uid, $2), updated_at = $3
		WHERE tenant_id = $1 AND status = 'RUNNING'
		RETURNING id`,
	RetryJob: `
		UPDATE lifecycle.deletion_jobs SET status = 'PARTIAL', next_attempt_at = $2, updated_at = $2
		WHERE tenant_id = $1 AND status IN ('BLOCKED', 'PARTIAL') AND cancel_requested_at IS NULL
		RETURNING id`,
	RetryDeleters: `UPDATE lifecycle.deletion_job_deleters SET status = 'PENDING', updated_at = $2 WHERE job_id = $1 AND status = 'BLOCKED'`,
	Reap: `
		UPDATE lifecycle.deletion_jobs SET status = 'CANCELLED', finished_at = $1, updated_at = $1, lease_owner = NULL,
			lease_expires_at = NULL, next_attempt_at = NULL
		WHERE status = 'RUNNING' AND cancel_requested_at IS NOT NULL AND lease_expires_at < $1`,
	StatusCounts: `SELECT ` + sqlstore.JobStatusExpr + `, count(*) FROM lifecycle.deletion_jobs GROUP BY 1`,
	Overdue: `
		SELECT min(not_before) FROM lifecycle.deletion_jobs j
		WHERE status = 'SCHEDULED' AND next_attempt_at <= $1 AND NOT ` + pgHeld,
	HeldJobs:    `SELECT count(*) FROM lifecycle.deletion_jobs j WHERE status NOT IN ('COMPLETED', 'CANCELLED') AND ` + pgHeld,
	ActiveHolds: `SELECT count(*) FROM lifecycle.tenant_holds WHERE released_at IS NULL`,
}
