-- Dead-letter integrity; see postgres/005_dlq_integrity.up.sql for what the
-- columns mean and for the JSON form of headers (keys that are not UTF-8 are
-- stored as "key_b64"). attempt_log is a JSON array as TEXT; republished_at
-- is microseconds since the epoch like the other timestamps.
ALTER TABLE dlq_messages ADD COLUMN last_error TEXT;
ALTER TABLE dlq_messages ADD COLUMN attempt_log TEXT NOT NULL DEFAULT '[]';
ALTER TABLE dlq_messages ADD COLUMN republished_at INTEGER;

-- The archive without a unique position (SQLite cannot drop a table
-- constraint, so the table is rebuilt), with the new columns in the order
-- of dlq_messages: archiving copies rows with SELECT *.
CREATE TABLE dlq_messages_archive_new (
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
    republished_at   INTEGER
);
INSERT INTO dlq_messages_archive_new SELECT *, NULL, '[]', NULL FROM dlq_messages_archive;
DROP TABLE dlq_messages_archive;
ALTER TABLE dlq_messages_archive_new RENAME TO dlq_messages_archive;
CREATE INDEX IF NOT EXISTS idx_dlq_messages_archive_updated_at ON dlq_messages_archive (updated_at);
-- Intake looks positions up here.
CREATE INDEX IF NOT EXISTS idx_dlq_messages_archive_position
    ON dlq_messages_archive (source, dlq_topic, source_partition, source_offset);
