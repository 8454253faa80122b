-- Error groups; see postgres/025_dlq_error_groups.up.sql.
ALTER TABLE dlq_failure_groups ADD COLUMN error_group TEXT NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS idx_dlq_failure_groups_error_group ON dlq_failure_groups (error_group);
