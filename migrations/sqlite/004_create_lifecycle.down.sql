DROP TABLE IF EXISTS idempotency_keys;
DROP TABLE IF EXISTS deletion_job_deleters;
DROP TABLE IF EXISTS deletion_jobs;
