-- Back to 006. Lossy: of live rows sharing a position (a topic deleted and
-- created again), only the oldest is kept, so that the position can be
-- unique again; the returns recorded are dropped but the newest of each
-- record, which goes back to last_feedback; messages without an original
-- topic keep an empty one.
DROP INDEX IF EXISTS dlq.idx_dlq_messages_due;
CREATE INDEX IF NOT EXISTS idx_dlq_messages_due ON dlq.dlq_messages (next_retry_at) WHERE status = 'PENDING';

UPDATE dlq.dlq_messages m SET last_feedback = r.pos
FROM (SELECT DISTINCT ON (message_id) message_id,
        source || '/' || dlq_topic || '/' || source_partition || '/' || source_offset AS pos
      FROM dlq.dlq_returns ORDER BY message_id, applied_at DESC) r
WHERE m.id = r.message_id;
DROP TABLE IF EXISTS dlq.dlq_returns;
DROP INDEX IF EXISTS dlq.idx_dlq_messages_undigested;

DELETE FROM dlq.dlq_messages a
USING dlq.dlq_messages b
WHERE a.source = b.source AND a.dlq_topic = b.dlq_topic AND a.source_partition = b.source_partition
    AND a.source_offset = b.source_offset AND (a.created_at, a.id) > (b.created_at, b.id);
ALTER TABLE dlq.dlq_messages DROP CONSTRAINT uq_dlq_messages_position;
ALTER TABLE dlq.dlq_messages ADD CONSTRAINT uq_dlq_messages_position
    UNIQUE (source, dlq_topic, source_partition, source_offset);
ALTER TABLE dlq.dlq_messages DROP COLUMN content_digest;
ALTER TABLE dlq.dlq_messages_archive DROP COLUMN content_digest;
