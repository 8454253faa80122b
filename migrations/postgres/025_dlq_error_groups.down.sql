-- Error groups are derived from the failure groups' patterns: dropping
-- them loses nothing that the up migration cannot give back.
DROP INDEX IF EXISTS dlq.idx_dlq_failure_groups_error_group;
ALTER TABLE dlq.dlq_failure_groups DROP COLUMN IF EXISTS error_group;
