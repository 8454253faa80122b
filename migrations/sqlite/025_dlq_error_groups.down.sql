-- Error groups are derived from the failure groups' patterns: dropping
-- them loses nothing that the up migration cannot give back.
DROP INDEX IF EXISTS idx_dlq_failure_groups_error_group;
ALTER TABLE dlq_failure_groups DROP COLUMN error_group;
