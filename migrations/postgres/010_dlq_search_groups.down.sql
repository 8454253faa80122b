DROP INDEX IF EXISTS dlq.idx_dlq_messages_payload_trgm;
DROP INDEX IF EXISTS dlq.idx_dlq_messages_error_trgm;
-- pg_trgm stays: other objects of the database may use it.
CREATE INDEX IF NOT EXISTS idx_dlq_messages_status ON dlq.dlq_messages (status);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_created_at ON dlq.dlq_messages (created_at);
DROP INDEX IF EXISTS dlq.idx_dlq_messages_search_key;
DROP INDEX IF EXISTS dlq.idx_dlq_messages_search_status;
DROP INDEX IF EXISTS dlq.idx_dlq_messages_search_group;
DROP INDEX IF EXISTS dlq.idx_dlq_messages_search_original_topic;
DROP INDEX IF EXISTS dlq.idx_dlq_messages_search_dlq_topic;
DROP TRIGGER IF EXISTS trg_dlq_group_counts_delete ON dlq.dlq_messages;
DROP TRIGGER IF EXISTS trg_dlq_group_counts_update ON dlq.dlq_messages;
DROP FUNCTION IF EXISTS dlq.count_group_rows();
DROP TABLE IF EXISTS dlq.dlq_group_counts;
DROP TABLE IF EXISTS dlq.dlq_failure_groups;
DROP INDEX IF EXISTS dlq.idx_dlq_messages_ungrouped;
ALTER TABLE dlq.dlq_messages_archive DROP COLUMN IF EXISTS failure_group;
ALTER TABLE dlq.dlq_messages DROP COLUMN IF EXISTS failure_group;
