DROP TRIGGER IF EXISTS trg_dlq_search_update ON dlq.dlq_messages;
DROP TRIGGER IF EXISTS trg_dlq_search_delete ON dlq.dlq_messages;
DROP FUNCTION IF EXISTS dlq.search_requeue();
DROP FUNCTION IF EXISTS dlq.search_forget();
DROP TABLE IF EXISTS dlq.dlq_search_text;
DROP TABLE IF EXISTS dlq.dlq_search_pending;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        EXECUTE 'CREATE INDEX IF NOT EXISTS idx_dlq_messages_error_trgm ON dlq.dlq_messages USING gin (error_message gin_trgm_ops)';
    END IF;
END
$$;
CREATE INDEX IF NOT EXISTS idx_dlq_messages_original_topic ON dlq.dlq_messages (original_topic, created_at, id);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_dlq_topic ON dlq.dlq_messages (dlq_topic, created_at, id);
