-- Dead letters are told apart by what was read, not only where; every
-- returned replay is recorded; a message has no original topic rather than
-- its own DLQ topic; due retries are indexed by source. See
-- postgres/007_dlq_digest_returns.up.sql for what each part means.
--
-- The position's uniqueness is a table constraint, which SQLite cannot
-- change: the table is rebuilt with content_digest in the unique key (its
-- indexes and counting triggers with it).
CREATE TABLE dlq_messages_new (
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
    content_digest   BLOB    NOT NULL DEFAULT x'',
    CHECK (status IN ('PENDING', 'RETRYING', 'RESOLVED', 'DEAD')),
    CHECK (retry_count >= 0 AND max_retries >= 0),
    UNIQUE (source, dlq_topic, source_partition, source_offset, content_digest)
);
INSERT INTO dlq_messages_new SELECT *, x'' FROM dlq_messages;
DROP TABLE dlq_messages;
ALTER TABLE dlq_messages_new RENAME TO dlq_messages;

CREATE INDEX IF NOT EXISTS idx_dlq_messages_original_topic ON dlq_messages (original_topic, created_at, id);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_dlq_topic ON dlq_messages (dlq_topic, created_at, id);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_status ON dlq_messages (status);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_created_at ON dlq_messages (created_at);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_due ON dlq_messages (source, next_retry_at) WHERE status = 'PENDING';
CREATE INDEX IF NOT EXISTS idx_dlq_messages_leases ON dlq_messages (lease_expires_at) WHERE status = 'RETRYING';
CREATE INDEX IF NOT EXISTS idx_dlq_messages_finished ON dlq_messages (updated_at) WHERE status IN ('RESOLVED', 'DEAD');
CREATE INDEX IF NOT EXISTS idx_dlq_messages_undigested ON dlq_messages (source, dlq_topic, source_partition, source_offset)
    WHERE content_digest = x'';

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

-- Same column at the same place: archiving copies rows with SELECT *.
ALTER TABLE dlq_messages_archive ADD COLUMN content_digest BLOB NOT NULL DEFAULT x'';

CREATE TABLE IF NOT EXISTS dlq_returns (
    source           TEXT    NOT NULL,
    dlq_topic        TEXT    NOT NULL,
    source_partition INTEGER NOT NULL,
    source_offset    INTEGER NOT NULL,
    content_digest   BLOB    NOT NULL,
    message_id       TEXT    NOT NULL,
    applied_at       INTEGER NOT NULL,
    PRIMARY KEY (source, dlq_topic, source_partition, source_offset, content_digest)
);
CREATE INDEX IF NOT EXISTS idx_dlq_returns_message ON dlq_returns (message_id);
-- last_feedback is "source/topic/partition/offset"; names hold no '/'.
INSERT OR IGNORE INTO dlq_returns (source, dlq_topic, source_partition, source_offset, content_digest, message_id, applied_at)
SELECT src, substr(r1, 1, instr(r1, '/') - 1),
    CAST(substr(r2, 1, instr(r2, '/') - 1) AS INTEGER), CAST(substr(r2, instr(r2, '/') + 1) AS INTEGER), x'', id, updated_at
FROM (SELECT id, updated_at, src, r1, substr(r1, instr(r1, '/') + 1) AS r2
      FROM (SELECT id, updated_at, substr(f, 1, instr(f, '/') - 1) AS src, substr(f, instr(f, '/') + 1) AS r1
            FROM (SELECT id, updated_at, last_feedback AS f FROM dlq_messages WHERE last_feedback IS NOT NULL
                  UNION ALL
                  SELECT id, updated_at, last_feedback FROM dlq_messages_archive WHERE last_feedback IS NOT NULL)))
WHERE src <> '' AND instr(r2, '/') > 0;

UPDATE dlq_messages
SET original_topic = '',
    last_error = 'no original topic: nothing named one when it was taken in, and its DLQ topic is not one'
WHERE original_topic = dlq_topic;
