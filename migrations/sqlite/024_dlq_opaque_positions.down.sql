-- Back to Kafka positions; see postgres/024_dlq_opaque_positions.down.sql.
-- A position other than a log position (12 bytes) fails the CHECK below,
-- and with it the whole migration, before anything changed. SQLite has no
-- function from bytes to an integer: partition and offset are summed from
-- the hex digits of the position's 4 and 8 bytes.
CREATE TEMP TABLE dlq_down_guard (positions_protocol_2_cannot_hold INTEGER CHECK (positions_protocol_2_cannot_hold = 0));
INSERT INTO dlq_down_guard
SELECT (SELECT count(*) FROM dlq_messages WHERE length(source_position) <> 12)
    + (SELECT count(*) FROM dlq_messages_archive WHERE length(source_position) <> 12)
    + (SELECT count(*) FROM dlq_returns WHERE length(source_position) <> 12);
DROP TABLE dlq_down_guard;
DROP TABLE IF EXISTS dlq_unacked;

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
    content_digest   BLOB    NOT NULL DEFAULT x'',
    failure_group    TEXT    NOT NULL DEFAULT '',
    truncated        INTEGER NOT NULL DEFAULT 0,
    CHECK (status IN ('PENDING', 'RETRYING', 'RESOLVED', 'DEAD')),
    CHECK (retry_count >= 0 AND max_retries >= 0),
    UNIQUE (source, dlq_topic, source_partition, source_offset, content_digest)
);
INSERT INTO dlq_messages_old
SELECT id, original_topic, error_message, retry_count, max_retries, payload, status, created_at, updated_at,
    last_retry_at, source, dlq_topic, ((instr('0123456789ABCDEF', substr(hex(source_position), 1, 1)) - 1) * 268435456 + (instr('0123456789ABCDEF', substr(hex(source_position), 2, 1)) - 1) * 16777216 + (instr('0123456789ABCDEF', substr(hex(source_position), 3, 1)) - 1) * 1048576 + (instr('0123456789ABCDEF', substr(hex(source_position), 4, 1)) - 1) * 65536 + (instr('0123456789ABCDEF', substr(hex(source_position), 5, 1)) - 1) * 4096 + (instr('0123456789ABCDEF', substr(hex(source_position), 6, 1)) - 1) * 256 + (instr('0123456789ABCDEF', substr(hex(source_position), 7, 1)) - 1) * 16 + (instr('0123456789ABCDEF', substr(hex(source_position), 8, 1)) - 1)), ((instr('0123456789ABCDEF', substr(hex(source_position), 9, 1)) - 1) * 1152921504606846976 + (instr('0123456789ABCDEF', substr(hex(source_position), 10, 1)) - 1) * 72057594037927936 + (instr('0123456789ABCDEF', substr(hex(source_position), 11, 1)) - 1) * 4503599627370496 + (instr('0123456789ABCDEF', substr(hex(source_position), 12, 1)) - 1) * 281474976710656 + (instr('0123456789ABCDEF', substr(hex(source_position), 13, 1)) - 1) * 17592186044416 + (instr('0123456789ABCDEF', substr(hex(source_position), 14, 1)) - 1) * 1099511627776 + (instr('0123456789ABCDEF', substr(hex(source_position), 15, 1)) - 1) * 68719476736 + (instr('0123456789ABCDEF', substr(hex(source_position), 16, 1)) - 1) * 4294967296 + (instr('0123456789ABCDEF', substr(hex(source_position), 17, 1)) - 1) * 268435456 + (instr('0123456789ABCDEF', substr(hex(source_position), 18, 1)) - 1) * 16777216 + (instr('0123456789ABCDEF', substr(hex(source_position), 19, 1)) - 1) * 1048576 + (instr('0123456789ABCDEF', substr(hex(source_position), 20, 1)) - 1) * 65536 + (instr('0123456789ABCDEF', substr(hex(source_position), 21, 1)) - 1) * 4096 + (instr('0123456789ABCDEF', substr(hex(source_position), 22, 1)) - 1) * 256 + (instr('0123456789ABCDEF', substr(hex(source_position), 23, 1)) - 1) * 16 + (instr('0123456789ABCDEF', substr(hex(source_position), 24, 1)) - 1) * 1), message_key, headers, raw_payload, produced_at,
    next_retry_at, lease_owner, lease_expires_at, last_feedback, last_error, attempt_log, republished_at, content_digest,
    failure_group, truncated
FROM dlq_messages;
DROP TABLE dlq_messages;
ALTER TABLE dlq_messages_old RENAME TO dlq_messages;

CREATE INDEX idx_dlq_messages_original_topic ON dlq_messages (original_topic, created_at, id);
CREATE INDEX idx_dlq_messages_dlq_topic ON dlq_messages (dlq_topic, created_at, id);
CREATE INDEX idx_dlq_messages_due ON dlq_messages (source, next_retry_at) WHERE status = 'PENDING';
CREATE INDEX idx_dlq_messages_leases ON dlq_messages (lease_expires_at) WHERE status = 'RETRYING';
CREATE INDEX idx_dlq_messages_finished ON dlq_messages (updated_at) WHERE status IN ('RESOLVED', 'DEAD');
CREATE INDEX idx_dlq_messages_undigested ON dlq_messages (source, dlq_topic, source_partition, source_offset)
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
ALTER TABLE dlq_messages_archive ADD COLUMN source_partition INTEGER NOT NULL DEFAULT 0;
ALTER TABLE dlq_messages_archive ADD COLUMN source_offset INTEGER NOT NULL DEFAULT 0;
UPDATE dlq_messages_archive SET source_partition = ((instr('0123456789ABCDEF', substr(hex(source_position), 1, 1)) - 1) * 268435456 + (instr('0123456789ABCDEF', substr(hex(source_position), 2, 1)) - 1) * 16777216 + (instr('0123456789ABCDEF', substr(hex(source_position), 3, 1)) - 1) * 1048576 + (instr('0123456789ABCDEF', substr(hex(source_position), 4, 1)) - 1) * 65536 + (instr('0123456789ABCDEF', substr(hex(source_position), 5, 1)) - 1) * 4096 + (instr('0123456789ABCDEF', substr(hex(source_position), 6, 1)) - 1) * 256 + (instr('0123456789ABCDEF', substr(hex(source_position), 7, 1)) - 1) * 16 + (instr('0123456789ABCDEF', substr(hex(source_position), 8, 1)) - 1)), source_offset = ((instr('0123456789ABCDEF', substr(hex(source_position), 9, 1)) - 1) * 1152921504606846976 + (instr('0123456789ABCDEF', substr(hex(source_position), 10, 1)) - 1) * 72057594037927936 + (instr('0123456789ABCDEF', substr(hex(source_position), 11, 1)) - 1) * 4503599627370496 + (instr('0123456789ABCDEF', substr(hex(source_position), 12, 1)) - 1) * 281474976710656 + (instr('0123456789ABCDEF', substr(hex(source_position), 13, 1)) - 1) * 17592186044416 + (instr('0123456789ABCDEF', substr(hex(source_position), 14, 1)) - 1) * 1099511627776 + (instr('0123456789ABCDEF', substr(hex(source_position), 15, 1)) - 1) * 68719476736 + (instr('0123456789ABCDEF', substr(hex(source_position), 16, 1)) - 1) * 4294967296 + (instr('0123456789ABCDEF', substr(hex(source_position), 17, 1)) - 1) * 268435456 + (instr('0123456789ABCDEF', substr(hex(source_position), 18, 1)) - 1) * 16777216 + (instr('0123456789ABCDEF', substr(hex(source_position), 19, 1)) - 1) * 1048576 + (instr('0123456789ABCDEF', substr(hex(source_position), 20, 1)) - 1) * 65536 + (instr('0123456789ABCDEF', substr(hex(source_position), 21, 1)) - 1) * 4096 + (instr('0123456789ABCDEF', substr(hex(source_position), 22, 1)) - 1) * 256 + (instr('0123456789ABCDEF', substr(hex(source_position), 23, 1)) - 1) * 16 + (instr('0123456789ABCDEF', substr(hex(source_position), 24, 1)) - 1) * 1);
ALTER TABLE dlq_messages_archive DROP COLUMN source_position;
ALTER TABLE dlq_messages_archive DROP COLUMN position_display;
ALTER TABLE dlq_messages_archive DROP COLUMN error_class;
ALTER TABLE dlq_messages_archive DROP COLUMN failed_attempts;
ALTER TABLE dlq_messages_archive DROP COLUMN first_failed_at;
ALTER TABLE dlq_messages_archive DROP COLUMN origin_from;
ALTER TABLE dlq_messages_archive DROP COLUMN origin_configured;
CREATE INDEX IF NOT EXISTS idx_dlq_messages_archive_position
    ON dlq_messages_archive (source, dlq_topic, source_partition, source_offset);

CREATE TABLE dlq_returns_old (
    source           TEXT    NOT NULL,
    dlq_topic        TEXT    NOT NULL,
    source_partition INTEGER NOT NULL,
    source_offset    INTEGER NOT NULL,
    content_digest   BLOB    NOT NULL,
    message_id       TEXT    NOT NULL,
    applied_at       INTEGER NOT NULL,
    PRIMARY KEY (source, dlq_topic, source_partition, source_offset, content_digest)
);
INSERT INTO dlq_returns_old
SELECT source, dlq_topic, ((instr('0123456789ABCDEF', substr(hex(source_position), 1, 1)) - 1) * 268435456 + (instr('0123456789ABCDEF', substr(hex(source_position), 2, 1)) - 1) * 16777216 + (instr('0123456789ABCDEF', substr(hex(source_position), 3, 1)) - 1) * 1048576 + (instr('0123456789ABCDEF', substr(hex(source_position), 4, 1)) - 1) * 65536 + (instr('0123456789ABCDEF', substr(hex(source_position), 5, 1)) - 1) * 4096 + (instr('0123456789ABCDEF', substr(hex(source_position), 6, 1)) - 1) * 256 + (instr('0123456789ABCDEF', substr(hex(source_position), 7, 1)) - 1) * 16 + (instr('0123456789ABCDEF', substr(hex(source_position), 8, 1)) - 1)), ((instr('0123456789ABCDEF', substr(hex(source_position), 9, 1)) - 1) * 1152921504606846976 + (instr('0123456789ABCDEF', substr(hex(source_position), 10, 1)) - 1) * 72057594037927936 + (instr('0123456789ABCDEF', substr(hex(source_position), 11, 1)) - 1) * 4503599627370496 + (instr('0123456789ABCDEF', substr(hex(source_position), 12, 1)) - 1) * 281474976710656 + (instr('0123456789ABCDEF', substr(hex(source_position), 13, 1)) - 1) * 17592186044416 + (instr('0123456789ABCDEF', substr(hex(source_position), 14, 1)) - 1) * 1099511627776 + (instr('0123456789ABCDEF', substr(hex(source_position), 15, 1)) - 1) * 68719476736 + (instr('0123456789ABCDEF', substr(hex(source_position), 16, 1)) - 1) * 4294967296 + (instr('0123456789ABCDEF', substr(hex(source_position), 17, 1)) - 1) * 268435456 + (instr('0123456789ABCDEF', substr(hex(source_position), 18, 1)) - 1) * 16777216 + (instr('0123456789ABCDEF', substr(hex(source_position), 19, 1)) - 1) * 1048576 + (instr('0123456789ABCDEF', substr(hex(source_position), 20, 1)) - 1) * 65536 + (instr('0123456789ABCDEF', substr(hex(source_position), 21, 1)) - 1) * 4096 + (instr('0123456789ABCDEF', substr(hex(source_position), 22, 1)) - 1) * 256 + (instr('0123456789ABCDEF', substr(hex(source_position), 23, 1)) - 1) * 16 + (instr('0123456789ABCDEF', substr(hex(source_position), 24, 1)) - 1) * 1), content_digest, message_id, applied_at FROM dlq_returns;
DROP TABLE dlq_returns;
ALTER TABLE dlq_returns_old RENAME TO dlq_returns;
CREATE INDEX IF NOT EXISTS idx_dlq_returns_message ON dlq_returns (message_id);
