-- Dead letters are told apart by what was read, not only where.
--
-- content_digest: SHA-256 over the key, headers, value and timestamp read at
-- the position (dlq.Digest). A position stored with the same digest is a
-- redelivery; with another digest it is a new dead letter: a DLQ topic
-- deleted and created again starts its offsets at 0 again. Rows stored
-- before this migration have an empty digest, which matches any: a re-read
-- of their positions stays a redelivery.
ALTER TABLE dlq.dlq_messages ADD COLUMN content_digest BYTEA NOT NULL DEFAULT '\x';
-- Same column at the same place: archiving copies rows with SELECT *.
ALTER TABLE dlq.dlq_messages_archive ADD COLUMN content_digest BYTEA NOT NULL DEFAULT '\x';
ALTER TABLE dlq.dlq_messages DROP CONSTRAINT uq_dlq_messages_position;
ALTER TABLE dlq.dlq_messages ADD CONSTRAINT uq_dlq_messages_position
    UNIQUE (source, dlq_topic, source_partition, source_offset, content_digest);
-- Intake looks every new position up among the rows without a digest: in
-- an index of those alone, which shrinks to nothing as they are archived.
CREATE INDEX IF NOT EXISTS idx_dlq_messages_undigested ON dlq.dlq_messages
    (source, dlq_topic, source_partition, source_offset) WHERE content_digest = '\x';

-- Every returned replay applied to its record (x-dlq-id), by position and
-- digest: reading a DLQ topic again (group changed, offsets reset, a crash
-- between store and commit) finds it here and applies nothing twice. It
-- replaces last_feedback, which kept only the latest return; that one is
-- carried over with an empty digest (matching any).
CREATE TABLE IF NOT EXISTS dlq.dlq_returns (
    source           TEXT         NOT NULL,
    dlq_topic        VARCHAR(255) NOT NULL,
    source_partition INT          NOT NULL,
    source_offset    BIGINT       NOT NULL,
    content_digest   BYTEA        NOT NULL,
    message_id       UUID         NOT NULL,
    applied_at       TIMESTAMPTZ  NOT NULL,
    PRIMARY KEY (source, dlq_topic, source_partition, source_offset, content_digest)
);
CREATE INDEX IF NOT EXISTS idx_dlq_returns_message ON dlq.dlq_returns (message_id);
INSERT INTO dlq.dlq_returns (source, dlq_topic, source_partition, source_offset, content_digest, message_id, applied_at)
SELECT split_part(last_feedback, '/', 1), split_part(last_feedback, '/', 2), split_part(last_feedback, '/', 3)::int,
    split_part(last_feedback, '/', 4)::bigint, '\x', id, updated_at
FROM (SELECT id, last_feedback, updated_at FROM dlq.dlq_messages
      UNION ALL SELECT id, last_feedback, updated_at FROM dlq.dlq_messages_archive) m
WHERE last_feedback ~ '^[^/]+/[^/]+/[0-9]+/[0-9]+$'
ON CONFLICT DO NOTHING;

-- A message whose original topic was its own DLQ topic (the old fallback
-- when nothing named one) has no original topic: it is never republished
-- into the DLQ it came from.
UPDATE dlq.dlq_messages
SET original_topic = '',
    last_error = 'no original topic: nothing named one when it was taken in, and its DLQ topic is not one'
WHERE original_topic = dlq_topic;

-- Due automatic retries, by source: the retry loop claims only the
-- configured sources' messages, and the PENDING messages of a source that
-- is not configured are counted from here.
DROP INDEX IF EXISTS dlq.idx_dlq_messages_due;
CREATE INDEX IF NOT EXISTS idx_dlq_messages_due ON dlq.dlq_messages (source, next_retry_at) WHERE status = 'PENDING';
