ALTER TABLE lifecycle.deletion_job_deleters DROP COLUMN IF EXISTS verification;
ALTER TABLE lifecycle.deletion_job_deleters DROP COLUMN IF EXISTS breakdown;
