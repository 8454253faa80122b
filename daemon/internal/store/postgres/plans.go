package postgres

import "github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"

var pgPlans = sqlstore.PlanSQL{
	OnCreate: `
		UPDATE lifecycle.deletion_jobs SET plan_hash = NULLIF($2, ''), approval_required = $3::boolean, approval_pending = $3::boolean,
			status = CASE WHEN $3::boolean THEN 'SCHEDULED' ELSE status END,
			next_attempt_at = CASE WHEN $3::boolean THEN NULL ELSE next_attempt_at END
		WHERE id = $1`,
	Save: `
		INSERT INTO lifecycle.deletion_plans (plan_hash, body, first_seen_at) VALUES ($1, $2::jsonb, $3)
		ON CONFLICT (plan_hash) DO NOTHING`,
	Body: `SELECT body::text FROM lifecycle.deletion_plans WHERE plan_hash = $1`,
	// An approved job waits out what is left of its grace period.
	Approve: `
		UPDATE lifecycle.deletion_jobs SET approval_pending = FALSE, approved_at = $4, approved_by_uid = $3, plan_hash = $2,
			plan_drift = NULL, last_error = NULL, updated_at = $4,
			status = CASE WHEN not_before > $4 THEN 'SCHEDULED' ELSE 'PENDING' END,
			next_attempt_at = CASE WHEN not_before > $4 THEN not_before ELSE $4 END
		WHERE id = $1 AND approval_pending AND status = 'SCHEDULED'`,
	// A cancel requested during the attempt wins, as in finish.
	Await: `
		UPDATE lifecycle.deletion_jobs SET
			status = CASE WHEN cancel_requested_at IS NOT NULL THEN 'CANCELLED' ELSE 'SCHEDULED' END,
			approval_pending = cancel_requested_at IS NULL,
			plan_drift = CASE WHEN cancel_requested_at IS NULL THEN $3 END, last_error = $3, next_attempt_at = NULL,
			finished_at = CASE WHEN cancel_requested_at IS NOT NULL THEN $4::timestamptz END,
			updated_at = $4, lease_owner = NULL, lease_expires_at = NULL
		WHERE id = $1 AND lease_owner = $2 AND status = 'RUNNING'`,
	Adopt: `UPDATE lifecycle.deletion_jobs SET plan_hash = $3 WHERE id = $1 AND lease_owner = $2 AND status = 'RUNNING'`,
}
