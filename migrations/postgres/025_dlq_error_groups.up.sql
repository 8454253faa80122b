-- Error groups (issue 29): failure groups with the same normalised error
-- text, whatever their original topic or source, so that one outage seen
-- through Kafka, RabbitMQ and a failed-jobs table is one row to triage.
-- error_group is dlq.ErrorGroupID(pattern), written with the group; groups
-- recorded before this migration get theirs from the daemon's backfill
-- (the partial index finds them, and empties as they are done).
ALTER TABLE dlq.dlq_failure_groups ADD COLUMN IF NOT EXISTS error_group TEXT NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS idx_dlq_failure_groups_error_group ON dlq.dlq_failure_groups (error_group);
