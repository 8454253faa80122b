-- Plugin protocol 3: positions are opaque (see
-- postgres/024_dlq_opaque_positions.up.sql for what each part means).
--
-- The position's uniqueness is a table constraint, which SQLite cannot
-- change: the table is rebuilt without source_partition and source_offset
-- (its indexes and triggers with it, as they were), and the archive keeps
-- the same columns in the same order (archiving copies rows with SELECT *).
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
    failure_group    TEXT    NOT NULL DEFAULT '',
    truncated        INTEGER NOT NULL DEFAULT 0,
    source_position  BLOB    NOT NULL,
    position_display TEXT    NOT NULL DEFAULT '',
    error_class      TEXT    NOT NULL DEFAULT '',
    failed_attempts  INTEGER NOT NULL DEFAULT 0,
    first_failed_at  INTEGER,
    origin_from      TEXT    NOT NULL DEFAULT '',
    origin_configured INTEGER NOT NULL DEFAULT 0,
    CHECK (status IN ('PENDING', 'RETRYING', 'RESOLVED', 'DEAD')),
    CHECK (retry_count >= 0 AND max_retries >= 0),
    UNIQUE (source, dlq_topic, source_position, content_digest)
);
INSERT INTO dlq_messages_new
SELECT id, original_topic, error_message, retry_count, max_retries, payload, status, created_at, updated_at,
    last_retry_at, source, dlq_topic, message_key, headers, raw_payload, produced_at, next_retry_at, lease_owner,
    lease_expires_at, last_feedback, last_error, attempt_log, republished_at, content_digest, failure_group, truncated,
    unhex(printf('%08X%016X', source_partition & 4294967295, source_offset)), 'p' || source_partition || '@' || source_offset,
    '', 0, NULL, '', 0
FROM dlq_messages;
DROP TABLE dlq_messages;
ALTER TABLE dlq_messages_new RENAME TO dlq_messages;

CREATE INDEX idx_dlq_messages_original_topic ON dlq_messages (original_topic, created_at, id);
CREATE INDEX idx_dlq_messages_dlq_topic ON dlq_messages (dlq_topic, created_at, id);
CREATE INDEX idx_dlq_messages_due ON dlq_messages (source, next_retry_at) WHERE status = 'PENDING';
CREATE INDEX idx_dlq_messages_leases ON dlq_messages (lease_expires_at) WHERE status = 'RETRYING';
CREATE INDEX idx_dlq_messages_finished ON dlq_messages (updated_at) WHERE status IN ('RESOLVED', 'DEAD');
CREATE INDEX idx_dlq_messages_undigested ON dlq_messages (source, dlq_topic, source_position)
    WHERE content_digest = x'';
CREATE TRIGGER trg_dlq_counts_insert AFTER INSERT ON dlq_messages
BEGIN
    INSERT INTO dlq_topic_counts (dlq_topic, original_topic, status, n)
    VALUES (NEW.dlq_topic, NEW.original_topic, NEW.status, 1)
    ON CONFLICT (dlq_topic, original_topic, status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER trg_dlq_counts_delete AFTER DELETE ON dlq_messages
BEGIN
    UPDATE dlq_topic_counts SET n = n - 1
    WHERE dlq_topic = OLD.dlq_topic AND original_topic = OLD.original_topic AND status = OLD.status;
END;
CREATE TRIGGER trg_dlq_counts_update AFTER UPDATE OF status, dlq_topic, original_topic ON dlq_messages
WHEN OLD.status <> NEW.status OR OLD.dlq_topic <> NEW.dlq_topic OR OLD.original_topic <> NEW.original_topic
BEGIN
    UPDATE dlq_topic_counts SET n = n - 1
    WHERE dlq_topic = OLD.dlq_topic AND original_topic = OLD.original_topic AND status = OLD.status;
    INSERT INTO dlq_topic_counts (dlq_topic, original_topic, status, n)
    VALUES (NEW.dlq_topic, NEW.original_topic, NEW.status, 1)
    ON CONFLICT (dlq_topic, original_topic, status) DO UPDATE SET n = n + 1;
END;
CREATE INDEX idx_dlq_messages_ungrouped ON dlq_messages (id) WHERE failure_group = '';
CREATE TRIGGER trg_dlq_group_counts_delete AFTER DELETE ON dlq_messages
BEGIN
    UPDATE dlq_group_counts SET n = n - 1
    WHERE group_id = OLD.failure_group AND dlq_topic = OLD.dlq_topic AND original_topic = OLD.original_topic
        AND status = OLD.status;
END;
CREATE TRIGGER trg_dlq_group_counts_update AFTER UPDATE OF status, dlq_topic, original_topic, failure_group ON dlq_messages
WHEN OLD.status <> NEW.status OR OLD.dlq_topic <> NEW.dlq_topic OR OLD.original_topic <> NEW.original_topic
    OR OLD.failure_group <> NEW.failure_group
BEGIN
    UPDATE dlq_group_counts SET n = n - 1
    WHERE group_id = OLD.failure_group AND dlq_topic = OLD.dlq_topic AND original_topic = OLD.original_topic
        AND status = OLD.status;
    INSERT INTO dlq_group_counts (group_id, dlq_topic, original_topic, status, n)
    VALUES (NEW.failure_group, NEW.dlq_topic, NEW.original_topic, NEW.status, 1)
    ON CONFLICT (group_id, dlq_topic, original_topic, status) DO UPDATE SET n = n + 1;
END;
CREATE INDEX idx_dlq_messages_search_dlq_topic ON dlq_messages (dlq_topic, status, created_at, id);
CREATE INDEX idx_dlq_messages_search_original_topic ON dlq_messages (original_topic, status, created_at, id);
CREATE INDEX idx_dlq_messages_search_group ON dlq_messages (failure_group, status, created_at, id);
CREATE INDEX idx_dlq_messages_search_status ON dlq_messages (status, created_at, id);
CREATE INDEX idx_dlq_messages_search_key ON dlq_messages (message_key) WHERE message_key IS NOT NULL;
CREATE TRIGGER trg_dlq_events_attempt AFTER UPDATE OF attempt_log ON dlq_messages
WHEN json_extract(NEW.attempt_log, '$[#-1]') IS NOT NULL
 AND json_extract(NEW.attempt_log, '$[#-1]') IS NOT json_extract(OLD.attempt_log, '$[#-1]')
BEGIN
    INSERT INTO dlq_events (message_id, at, kind, detail, uid)
    VALUES (NEW.id, COALESCE(CAST(unixepoch(COALESCE(json_extract(NEW.attempt_log, '$[#-1].last_at'),
                json_extract(NEW.attempt_log, '$[#-1].at')), 'subsec') * 1000000 AS INTEGER), NEW.updated_at),
            CASE json_extract(NEW.attempt_log, '$[#-1].outcome') WHEN 'returned' THEN 'returned' WHEN 'revived' THEN 'revived' ELSE 'attempt' END,
            json_extract(NEW.attempt_log, '$[#-1]'), json_extract(NEW.attempt_log, '$[#-1].uid'));
END;
CREATE TRIGGER trg_dlq_search_insert AFTER INSERT ON dlq_messages
BEGIN
    INSERT INTO dlq_search_pending (id) VALUES (NEW.id);
END;
CREATE TRIGGER trg_dlq_search_delete AFTER DELETE ON dlq_messages
BEGIN
    DELETE FROM dlq_search_fts WHERE rowid = (SELECT doc FROM dlq_search_docs WHERE id = OLD.id);
    DELETE FROM dlq_search_docs WHERE id = OLD.id;
END;
CREATE TRIGGER trg_dlq_search_update AFTER UPDATE OF error_message, raw_payload ON dlq_messages
WHEN OLD.error_message IS NOT NEW.error_message OR OLD.raw_payload IS NOT NEW.raw_payload
BEGIN
    DELETE FROM dlq_search_fts WHERE rowid = (SELECT doc FROM dlq_search_docs WHERE id = OLD.id);
    DELETE FROM dlq_search_docs WHERE id = OLD.id;
    INSERT INTO dlq_search_pending (id) VALUES (NEW.id);
END;


DROP INDEX IF EXISTS idx_dlq_messages_archive_position;
ALTER TABLE dlq_messages_archive ADD COLUMN source_position BLOB NOT NULL DEFAULT x'';
ALTER TABLE dlq_messages_archive ADD COLUMN position_display TEXT NOT NULL DEFAULT '';
ALTER TABLE dlq_messages_archive ADD COLUMN error_class TEXT NOT NULL DEFAULT '';
ALTER TABLE dlq_messages_archive ADD COLUMN failed_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE dlq_messages_archive ADD COLUMN first_failed_at INTEGER;
ALTER TABLE dlq_messages_archive ADD COLUMN origin_from TEXT NOT NULL DEFAULT '';
ALTER TABLE dlq_messages_archive ADD COLUMN origin_configured INTEGER NOT NULL DEFAULT 0;
UPDATE dlq_messages_archive SET source_position = unhex(printf('%08X%016X', source_partition & 4294967295, source_offset)),
    position_display = 'p' || source_partition || '@' || source_offset;
ALTER TABLE dlq_messages_archive DROP COLUMN source_partition;
ALTER TABLE dlq_messages_archive DROP COLUMN source_offset;
CREATE INDEX IF NOT EXISTS idx_dlq_messages_archive_position
    ON dlq_messages_archive (source, dlq_topic, source_position);

CREATE TABLE dlq_returns_new (
    source           TEXT    NOT NULL,
    dlq_topic        TEXT    NOT NULL,
    content_digest   BLOB    NOT NULL,
    message_id       TEXT    NOT NULL,
    applied_at       INTEGER NOT NULL,
    source_position  BLOB    NOT NULL,
    PRIMARY KEY (source, dlq_topic, source_position, content_digest)
);
INSERT INTO dlq_returns_new
SELECT source, dlq_topic, content_digest, message_id, applied_at,
    unhex(printf('%08X%016X', source_partition & 4294967295, source_offset))
FROM dlq_returns;
DROP TABLE dlq_returns;
ALTER TABLE dlq_returns_new RENAME TO dlq_returns;
CREATE INDEX IF NOT EXISTS idx_dlq_returns_message ON dlq_returns (message_id);

CREATE TABLE IF NOT EXISTS dlq_unacked (
    source          TEXT    NOT NULL,
    dlq_topic       TEXT    NOT NULL,
    source_position BLOB    NOT NULL,
    content_digest  BLOB    NOT NULL,
    message_id      TEXT    NOT NULL,
    stored_at       INTEGER NOT NULL,
    committing      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (source, dlq_topic, source_position)
);
CREATE INDEX IF NOT EXISTS idx_dlq_unacked_digest ON dlq_unacked (source, dlq_topic, content_digest);
CREATE INDEX IF NOT EXISTS idx_dlq_unacked_stored ON dlq_unacked (stored_at);
