-- Refuses (the old CHECK constraints fail) while SCHEDULED or CANCELLED jobs
-- or CANCELLED deleters exist: an older lifecycled would run a cancelled
-- job. Delete or finish them first.
DROP TABLE IF EXISTS lifecycle.receipt_keys;
DROP TABLE IF EXISTS lifecycle.deletion_receipts;
DROP TABLE IF EXISTS lifecycle.tenant_holds;

ALTER TABLE lifecycle.deletion_job_deleters DROP CONSTRAINT IF EXISTS chk_deletion_job_deleters_status;
ALTER TABLE lifecycle.deletion_job_deleters ADD CONSTRAINT chk_deletion_job_deleters_status
    CHECK (status IN ('PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED'));

DROP INDEX IF EXISTS lifecycle.idx_deletion_jobs_running;
DROP INDEX IF EXISTS lifecycle.idx_deletion_jobs_created;
DROP INDEX IF EXISTS lifecycle.idx_deletion_jobs_due;
CREATE INDEX idx_deletion_jobs_due ON lifecycle.deletion_jobs (next_attempt_at) WHERE status <> 'COMPLETED';
DROP INDEX IF EXISTS lifecycle.uq_deletion_jobs_active;
CREATE UNIQUE INDEX uq_deletion_jobs_active ON lifecycle.deletion_jobs (tenant_id) WHERE status <> 'COMPLETED';

ALTER TABLE lifecycle.deletion_jobs
    DROP COLUMN IF EXISTS cancelled_by_uid,
    DROP COLUMN IF EXISTS cancel_requested_at,
    DROP COLUMN IF EXISTS requested_by_uid,
    DROP COLUMN IF EXISTS started_at,
    DROP COLUMN IF EXISTS not_before;
ALTER TABLE lifecycle.deletion_jobs DROP CONSTRAINT IF EXISTS chk_deletion_jobs_status;
ALTER TABLE lifecycle.deletion_jobs ADD CONSTRAINT chk_deletion_jobs_status
    CHECK (status IN ('PENDING', 'RUNNING', 'PARTIAL', 'COMPLETED'));
