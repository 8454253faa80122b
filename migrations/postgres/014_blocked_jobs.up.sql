-- BLOCKED: a job (or one of its deleters) that failed in a way no automatic
-- retry can fix (a permanent plugin error, a deleter no longer configured).
-- The runner no longer claims it; an operator's retry
-- (POST /api/v1/tenants/{t}/deletion/retry) makes it due again.
ALTER TABLE lifecycle.deletion_jobs DROP CONSTRAINT IF EXISTS chk_deletion_jobs_status;
ALTER TABLE lifecycle.deletion_jobs ADD CONSTRAINT chk_deletion_jobs_status
    CHECK (status IN ('SCHEDULED', 'PENDING', 'RUNNING', 'PARTIAL', 'BLOCKED', 'COMPLETED', 'CANCELLED'));
ALTER TABLE lifecycle.deletion_job_deleters DROP CONSTRAINT IF EXISTS chk_deletion_job_deleters_status;
ALTER TABLE lifecycle.deletion_job_deleters ADD CONSTRAINT chk_deletion_job_deleters_status
    CHECK (status IN ('PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'BLOCKED', 'CANCELLED'));
