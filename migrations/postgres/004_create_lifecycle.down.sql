DROP TABLE IF EXISTS lifecycle.idempotency_keys;
DROP TABLE IF EXISTS lifecycle.deletion_job_deleters;
DROP TABLE IF EXISTS lifecycle.deletion_jobs;
