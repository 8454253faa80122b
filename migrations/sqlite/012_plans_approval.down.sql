-- See postgres/012_plans_approval.down.sql: jobs waiting for approval are
-- cancelled, since an older lifecycled cannot approve them.
UPDATE deletion_jobs SET status = 'CANCELLED', finished_at = CAST(strftime('%s', 'now') AS INTEGER) * 1000000,
    updated_at = CAST(strftime('%s', 'now') AS INTEGER) * 1000000,
    last_error = 'cancelled by a schema downgrade while it waited for approval'
WHERE approval_pending AND status = 'SCHEDULED';
DROP TABLE deletion_plans;
ALTER TABLE deletion_jobs DROP COLUMN plan_drift;
ALTER TABLE deletion_jobs DROP COLUMN approved_by_uid;
ALTER TABLE deletion_jobs DROP COLUMN approved_at;
ALTER TABLE deletion_jobs DROP COLUMN approval_pending;
ALTER TABLE deletion_jobs DROP COLUMN approval_required;
ALTER TABLE deletion_jobs DROP COLUMN plan_hash;
