-- Per deleter of a job: its counts per table, key pattern, ... as the plugin
-- names them, {"total": {...}, "deleted": {...}} (JSON text), kept exact across
-- attempts as initial_count and deleted_count are; and what the verification
-- count after the deletes found, {"count": N, "breakdown": {...}} (NULL until
-- it ran).
ALTER TABLE deletion_job_deleters ADD COLUMN breakdown TEXT;
ALTER TABLE deletion_job_deleters ADD COLUMN verification TEXT;
