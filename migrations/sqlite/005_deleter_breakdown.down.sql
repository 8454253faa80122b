ALTER TABLE deletion_job_deleters DROP COLUMN verification;
ALTER TABLE deletion_job_deleters DROP COLUMN breakdown;
