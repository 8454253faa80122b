-- Dead letters for the embedded SQLite state store. Same columns and rules as
-- the PostgreSQL schema; timestamps are INTEGER microseconds since the Unix
-- epoch (UTC) so that comparisons and ordering are exact.
CREATE TABLE IF NOT EXISTS dlq_messages (
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
    CHECK (status IN ('PENDING', 'RETRYING', 'RESOLVED', 'DEAD')),
    CHECK (retry_count >= 0 AND max_retries >= 0),
    UNIQUE (source, dlq_topic, source_partition, source_offset)
);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_original_topic ON dlq_messages (original_topic, created_at, id);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_dlq_topic ON dlq_messages (dlq_topic, created_at, id);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_status ON dlq_messages (status);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_created_at ON dlq_messages (created_at);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_due ON dlq_messages (next_retry_at) WHERE status = 'PENDING';
CREATE INDEX IF NOT EXISTS idx_dlq_messages_leases ON dlq_messages (lease_expires_at) WHERE status = 'RETRYING';
CREATE INDEX IF NOT EXISTS idx_dlq_messages_finished ON dlq_messages (updated_at) WHERE status IN ('RESOLVED', 'DEAD');

CREATE TABLE IF NOT EXISTS dlq_topic_counts (
    dlq_topic      TEXT    NOT NULL,
    original_topic TEXT    NOT NULL,
    status         TEXT    NOT NULL,
    n              INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (dlq_topic, original_topic, status)
);

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

CREATE TABLE IF NOT EXISTS dlq_messages_archive (
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
    UNIQUE (source, dlq_topic, source_partition, source_offset)
);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_archive_updated_at ON dlq_messages_archive (updated_at);
