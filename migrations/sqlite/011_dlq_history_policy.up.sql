-- Dead-letter history and per-topic pauses; see
-- postgres/011_dlq_history_policy.up.sql for what they hold and why.
-- Times are INTEGER microseconds since the epoch like the other timestamps;
-- detail is a JSON object as TEXT.
CREATE TABLE IF NOT EXISTS dlq_events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id TEXT    NOT NULL,
    at         INTEGER NOT NULL,
    kind       TEXT    NOT NULL,
    detail     TEXT    NOT NULL DEFAULT '{}',
    uid        INTEGER
);
CREATE INDEX IF NOT EXISTS idx_dlq_events_message ON dlq_events (message_id, id);

INSERT INTO dlq_events (message_id, at, kind, detail, uid)
SELECT m.id, COALESCE(CAST(unixepoch(COALESCE(json_extract(e.value, '$.last_at'), json_extract(e.value, '$.at')), 'subsec') * 1000000 AS INTEGER), m.updated_at),
       CASE json_extract(e.value, '$.outcome') WHEN 'returned' THEN 'returned' WHEN 'revived' THEN 'revived' ELSE 'attempt' END,
       e.value, json_extract(e.value, '$.uid')
FROM (SELECT id, updated_at, attempt_log FROM dlq_messages UNION ALL SELECT id, updated_at, attempt_log FROM dlq_messages_archive) m,
     json_each(m.attempt_log) e
ORDER BY m.id, e.key;

CREATE TRIGGER IF NOT EXISTS trg_dlq_events_attempt AFTER UPDATE OF attempt_log ON dlq_messages
WHEN json_extract(NEW.attempt_log, '$[#-1]') IS NOT NULL
 AND json_extract(NEW.attempt_log, '$[#-1]') IS NOT json_extract(OLD.attempt_log, '$[#-1]')
BEGIN
    INSERT INTO dlq_events (message_id, at, kind, detail, uid)
    VALUES (NEW.id, COALESCE(CAST(unixepoch(COALESCE(json_extract(NEW.attempt_log, '$[#-1].last_at'),
                json_extract(NEW.attempt_log, '$[#-1].at')), 'subsec') * 1000000 AS INTEGER), NEW.updated_at),
            CASE json_extract(NEW.attempt_log, '$[#-1].outcome') WHEN 'returned' THEN 'returned' WHEN 'revived' THEN 'revived' ELSE 'attempt' END,
            json_extract(NEW.attempt_log, '$[#-1]'), json_extract(NEW.attempt_log, '$[#-1].uid'));
END;

CREATE TRIGGER IF NOT EXISTS trg_dlq_events_archived AFTER INSERT ON dlq_messages_archive
BEGIN
    INSERT INTO dlq_events (message_id, at, kind, detail)
    VALUES (NEW.id, CAST(unixepoch('subsec') * 1000000 AS INTEGER), 'archived', json_object('status', NEW.status));
END;

CREATE TRIGGER IF NOT EXISTS trg_dlq_events_purged AFTER DELETE ON dlq_messages_archive
BEGIN
    DELETE FROM dlq_events WHERE message_id = OLD.id;
END;

CREATE TABLE IF NOT EXISTS dlq_topic_pauses (
    dlq_topic TEXT    PRIMARY KEY,
    paused_at INTEGER NOT NULL,
    reason    TEXT    NOT NULL,
    auto      INTEGER NOT NULL DEFAULT 0,
    uid       INTEGER,
    resumed_at INTEGER
);

-- Auto-pause counts a topic's returns within a window.
CREATE INDEX IF NOT EXISTS idx_dlq_events_returned ON dlq_events (at) WHERE kind = 'returned';
