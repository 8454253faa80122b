-- Jobs waiting for approval become plain SCHEDULED jobs that no runner
-- claims (no next_attempt_at): an older lifecycled cannot approve them, so
-- they are cancelled rather than left to look like they will run.
UPDATE lifecycle.deletion_jobs SET status = 'CANCELLED', finished_at = now(), updated_at = now(),
    last_error = 'cancelled by a schema downgrade while it waited for approval'
WHERE approval_pending AND status = 'SCHEDULED';
DROP TABLE IF EXISTS lifecycle.deletion_plans;
ALTER TABLE lifecycle.deletion_jobs
    DROP COLUMN IF EXISTS plan_drift,
    DROP COLUMN IF EXISTS approved_by_uid,
    DROP COLUMN IF EXISTS approved_at,
    DROP COLUMN IF EXISTS approval_pending,
    DROP COLUMN IF EXISTS approval_required,
    DROP COLUMN IF EXISTS plan_hash;
