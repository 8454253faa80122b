-- Back to 006; lossy in the ways postgres/007_dlq_digest_returns.down.sql lists.
UPDATE dlq_messages SET last_feedback = (
    SELECT r.source || '/' || r.dlq_topic || '/' || r.source_partition || '/' || r.source_offset
    FROM dlq_returns r WHERE r.message_id = dlq_messages.id ORDER BY r.applied_at DESC LIMIT 1)
WHERE id IN (SELECT message_id FROM dlq_returns);
DROP TABLE IF EXISTS dlq_returns;

DELETE FROM dlq_messages WHERE EXISTS (
    SELECT 1 FROM dlq_messages b WHERE b.source = dlq_messages.source AND b.dlq_topic = dlq_messages.dlq_topic
        AND b.source_partition = dlq_messages.source_partition AND b.source_offset = dlq_messages.source_offset
        AND (b.created_at < dlq_messages.created_at OR (b.created_at = dlq_messages.created_at AND b.id < dlq_messages.id)));

CREATE TABLE dlq_messages_old (
    id               TEXT    PRIMARY KEY,
    original_topic   TEXT    NOT NULL,
    error_message    TEXT    NOT NULL,
    retry_count      INTEGER NOT NULL DEFAULT 0,
    max_retries      INTEGER NOT NULL DEFAULT 3,
    payload          TEXT,
    status           TEXT    NOT NULL DEFAULT 'PENDING',
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    last_retry_at    INTEGER,
    source           TEXT    NOT NULL DEFAULT '',
    dlq_topic        TEXT    NOT NULL DEFAULT '',
    source_partition INTEGER NOT NULL DEFAULT 0,
    source_offset    INTEGER NOT NULL DEFAULT 0,
    message_key      BLOB,
    headers          TEXT    NOT NULL DEFAULT '[]',
    raw_payload      BLOB,
    produced_at      INTEGER,
    next_retry_at    INTEGER,
    lease_owner      TEXT,
    lease_expires_at INTEGER,
    last_feedback    TEXT,
    last_error       TEXT,
    attempt_log      TEXT    NOT NULL DEFAULT '[]',
    republished_at   INTEGER,
    CHECK (status IN ('PENDING', 'RETRYING', 'RESOLVED', 'DEAD')),
    CHECK (retry_count >= 0 AND max_retries >= 0),
    UNIQUE (source, dlq_topic, source_partition, source_offset)
);
INSERT INTO dlq_messages_old SELECT id, original_topic, error_message, retry_count, max_retries, payload, status, created_at,
    updated_at, last_retry_at, source, dlq_topic, source_partition, source_offset, message_key, headers, raw_payload,
    produced_at, next_retry_at, lease_owner, lease_expires_at, last_feedback, last_error, attempt_log, republished_at
FROM dlq_messages;
DROP TABLE dlq_messages;
ALTER TABLE dlq_messages_old RENAME TO dlq_messages;

CREATE INDEX IF NOT EXISTS idx_dlq_messages_original_topic ON dlq_messages (original_topic, created_at, id);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_dlq_topic ON dlq_messages (dlq_topic, created_at, id);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_status ON dlq_messages (status);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_created_at ON dlq_messages (created_at);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_due ON dlq_messages (next_retry_at) WHERE status = 'PENDING';
CREATE INDEX IF NOT EXISTS idx_dlq_messages_leases ON dlq_messages (lease_expires_at) WHERE status = 'RETRYING';
CREATE INDEX IF NOT EXISTS idx_dlq_messages_finished ON dlq_messages (updated_at) WHERE status IN ('RESOLVED', 'DEAD');

CREATE TRIGGER IF NOT EXISTS trg_dlq_counts_insert AFTER INSERT ON dlq_messages
BEGIN
    INSERT INTO dlq_topic_counts (dlq_topic, original_topic, status, n)
    VALUES (NEW.dlq_topic, NEW.original_topic, NEW.status, 1)
    ON CONFLICT (dlq_topic, original_topic, status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS trg_dlq_counts_delete AFTER DELETE ON dlq_messages
BEGIN
    UPDATE dlq_topic_counts SET n = n - 1
    WHERE dlq_topic = OLD.dlq_topic AND original_topic = OLD.original_topic AND status = OLD.status;
END;
CREATE TRIGGER IF NOT EXISTS trg_dlq_counts_update AFTER UPDATE OF status, dlq_topic, original_topic ON dlq_messages
WHEN OLD.status <> NEW.status OR OLD.dlq_topic <> NEW.dlq_topic OR OLD.original_topic <> NEW.original_topic
BEGIN
    UPDATE dlq_topic_counts SET n = n - 1
    WHERE dlq_topic = OLD.dlq_topic AND original_topic = OLD.original_topic AND status = OLD.status;
    INSERT INTO dlq_topic_counts (dlq_topic, original_topic, status, n)
    VALUES (NEW.dlq_topic, NEW.original_topic, NEW.status, 1)
    ON CONFLICT (dlq_topic, original_topic, status) DO UPDATE SET n = n + 1;
END;

ALTER TABLE dlq_messages_archive DROP COLUMN content_digest;
