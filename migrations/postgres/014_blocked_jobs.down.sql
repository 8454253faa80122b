-- BLOCKED jobs and deleters become PARTIAL and FAILED again, which an older
-- lifecycled retries with backoff (its behaviour before BLOCKED existed).
UPDATE lifecycle.deletion_job_deleters SET status = 'FAILED' WHERE status = 'BLOCKED';
UPDATE lifecycle.deletion_jobs SET status = 'PARTIAL', next_attempt_at = COALESCE(next_attempt_at, updated_at) WHERE status = 'BLOCKED';
ALTER TABLE lifecycle.deletion_job_deleters DROP CONSTRAINT IF EXISTS chk_deletion_job_deleters_status;
ALTER TABLE lifecycle.deletion_job_deleters ADD CONSTRAINT chk_deletion_job_deleters_status
    CHECK (status IN ('PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED'));
ALTER TABLE lifecycle.deletion_jobs DROP CONSTRAINT IF EXISTS chk_deletion_jobs_status;
ALTER TABLE lifecycle.deletion_jobs ADD CONSTRAINT chk_deletion_jobs_status
    CHECK (status IN ('SCHEDULED', 'PENDING', 'RUNNING', 'PARTIAL', 'COMPLETED', 'CANCELLED'));
