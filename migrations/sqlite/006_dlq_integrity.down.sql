-- Back to 002; lossy in the ways postgres/005_dlq_integrity.down.sql lists.
UPDATE dlq_messages SET headers = (
    SELECT json_group_array(CASE WHEN json_type(e.value, '$.key_b64') IS NOT NULL
            THEN json_object('key', 'base64:' || json_extract(e.value, '$.key_b64'), 'value', json_extract(e.value, '$.value'))
            ELSE json(e.value) END)
    FROM json_each(dlq_messages.headers) AS e)
WHERE headers LIKE '%"key_b64"%';

CREATE TABLE dlq_messages_archive_old (
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
-- Of archived rows sharing a position, the newest is kept.
INSERT OR REPLACE INTO dlq_messages_archive_old
SELECT id, original_topic, error_message, retry_count, max_retries, payload, status, created_at, updated_at,
    last_retry_at, source, dlq_topic, source_partition, source_offset, message_key,
    CASE WHEN headers LIKE '%"key_b64"%' THEN (
        SELECT json_group_array(CASE WHEN json_type(e.value, '$.key_b64') IS NOT NULL
                THEN json_object('key', 'base64:' || json_extract(e.value, '$.key_b64'), 'value', json_extract(e.value, '$.value'))
                ELSE json(e.value) END)
        FROM json_each(a.headers) AS e) ELSE headers END,
    raw_payload, produced_at, next_retry_at, lease_owner, lease_expires_at, last_feedback
FROM dlq_messages_archive a ORDER BY updated_at, id;
DROP TABLE dlq_messages_archive;
ALTER TABLE dlq_messages_archive_old RENAME TO dlq_messages_archive;
CREATE INDEX IF NOT EXISTS idx_dlq_messages_archive_updated_at ON dlq_messages_archive (updated_at);

ALTER TABLE dlq_messages DROP COLUMN republished_at;
ALTER TABLE dlq_messages DROP COLUMN attempt_log;
ALTER TABLE dlq_messages DROP COLUMN last_error;
