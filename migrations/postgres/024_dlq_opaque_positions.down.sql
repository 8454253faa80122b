-- Back to Kafka positions: only a log position (sdk.LogPosition, 12 bytes)
-- has a partition and an offset, so a state store holding any other refuses
-- to go down rather than lose which message is which.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM dlq.dlq_messages WHERE length(source_position) <> 12)
        OR EXISTS (SELECT 1 FROM dlq.dlq_messages_archive WHERE length(source_position) <> 12)
        OR EXISTS (SELECT 1 FROM dlq.dlq_returns WHERE length(source_position) <> 12) THEN
        RAISE EXCEPTION 'dead letters of a source with positions other than Kafka offsets are stored: protocol 2 cannot hold them';
    END IF;
END $$;
DROP TABLE IF EXISTS dlq.dlq_unacked;

ALTER TABLE dlq.dlq_returns DROP CONSTRAINT dlq_returns_pkey;
ALTER TABLE dlq.dlq_returns ADD COLUMN source_partition INT, ADD COLUMN source_offset BIGINT;
UPDATE dlq.dlq_returns SET source_partition = get_byte(source_position, 0) << 24 | get_byte(source_position, 1) << 16
        | get_byte(source_position, 2) << 8 | get_byte(source_position, 3),
    source_offset = ('x' || encode(substring(source_position FROM 5 FOR 8), 'hex'))::bit(64)::bigint;
ALTER TABLE dlq.dlq_returns ALTER COLUMN source_partition SET NOT NULL, ALTER COLUMN source_offset SET NOT NULL;
ALTER TABLE dlq.dlq_returns DROP COLUMN source_position;
ALTER TABLE dlq.dlq_returns ADD PRIMARY KEY (source, dlq_topic, source_partition, source_offset, content_digest);

ALTER TABLE dlq.dlq_messages DROP CONSTRAINT uq_dlq_messages_position;
DROP INDEX IF EXISTS dlq.idx_dlq_messages_undigested;
DROP INDEX IF EXISTS dlq.idx_dlq_messages_archive_position;
ALTER TABLE dlq.dlq_messages ADD COLUMN source_partition INT NOT NULL DEFAULT 0, ADD COLUMN source_offset BIGINT NOT NULL DEFAULT 0;
ALTER TABLE dlq.dlq_messages_archive ADD COLUMN source_partition INT NOT NULL DEFAULT 0, ADD COLUMN source_offset BIGINT NOT NULL DEFAULT 0;
-- The position is not a change of the message: updated_at (retention's
-- clock) stays as it was.
ALTER TABLE dlq.dlq_messages DISABLE TRIGGER trg_dlq_messages_updated_at;
UPDATE dlq.dlq_messages SET source_partition = get_byte(source_position, 0) << 24 | get_byte(source_position, 1) << 16
        | get_byte(source_position, 2) << 8 | get_byte(source_position, 3),
    source_offset = ('x' || encode(substring(source_position FROM 5 FOR 8), 'hex'))::bit(64)::bigint;
ALTER TABLE dlq.dlq_messages ENABLE TRIGGER trg_dlq_messages_updated_at;
UPDATE dlq.dlq_messages_archive SET source_partition = get_byte(source_position, 0) << 24 | get_byte(source_position, 1) << 16
        | get_byte(source_position, 2) << 8 | get_byte(source_position, 3),
    source_offset = ('x' || encode(substring(source_position FROM 5 FOR 8), 'hex'))::bit(64)::bigint;
ALTER TABLE dlq.dlq_messages DROP COLUMN source_position, DROP COLUMN position_display, DROP COLUMN error_class,
    DROP COLUMN failed_attempts, DROP COLUMN first_failed_at, DROP COLUMN origin_from, DROP COLUMN origin_configured;
ALTER TABLE dlq.dlq_messages_archive DROP COLUMN source_position, DROP COLUMN position_display, DROP COLUMN error_class,
    DROP COLUMN failed_attempts, DROP COLUMN first_failed_at, DROP COLUMN origin_from, DROP COLUMN origin_configured;
ALTER TABLE dlq.dlq_messages ADD CONSTRAINT uq_dlq_messages_position
    UNIQUE (source, dlq_topic, source_partition, source_offset, content_digest);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_undigested ON dlq.dlq_messages
    (source, dlq_topic, source_partition, source_offset) WHERE content_digest = '\x';
CREATE INDEX IF NOT EXISTS idx_dlq_messages_archive_position
    ON dlq.dlq_messages_archive (source, dlq_topic, source_partition, source_offset);
