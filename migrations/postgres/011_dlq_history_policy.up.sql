-- Dead-letter history and per-topic pauses (issue 13, items 5 and 6).
--
-- dlq_events: what happened to a message, one row per event, oldest first
-- (id order). Republish attempts, returns and revives are written by a
-- trigger from the entry the same UPDATE appends to attempt_log, so they are
-- in the transaction of the state change they record whoever runs it, and
-- the history keeps every entry while attempt_log keeps the newest 50.
-- Operator actions without a state change (replay, delete) are written by
-- lifecycled in the transaction of the action. Intake is not a row here: the
-- message's own row is its record (source position, created_at), and a
-- per-row trigger on the intake's INSERT would cost its throughput.
-- Archiving adds an "archived" event; purging an archived message drops its
-- events with it.
CREATE TABLE IF NOT EXISTS dlq.dlq_events (
    id         BIGSERIAL   PRIMARY KEY,
    message_id UUID        NOT NULL,
    at         TIMESTAMPTZ NOT NULL,
    kind       TEXT        NOT NULL,
    detail     JSONB       NOT NULL DEFAULT '{}',
    uid        BIGINT
);
CREATE INDEX IF NOT EXISTS idx_dlq_events_message ON dlq.dlq_events (message_id, id);

-- The entries already in attempt_log become the first events, in order.
INSERT INTO dlq.dlq_events (message_id, at, kind, detail, uid)
SELECT m.id, COALESCE(e.v ->> 'last_at', e.v ->> 'at')::timestamptz,
       CASE e.v ->> 'outcome' WHEN 'returned' THEN 'returned' WHEN 'revived' THEN 'revived' ELSE 'attempt' END,
       e.v, (e.v ->> 'uid')::bigint
FROM (SELECT id, attempt_log FROM dlq.dlq_messages UNION ALL SELECT id, attempt_log FROM dlq.dlq_messages_archive) m
CROSS JOIN LATERAL jsonb_array_elements(m.attempt_log) WITH ORDINALITY AS e(v, n)
ORDER BY m.id, e.n;

-- One statement per UPDATE statement, not one function call per row: the
-- transition tables are the ones the counts trigger (002) already has the
-- UPDATE capture, so a page of 100 outcomes costs one INSERT ... SELECT. A
-- statement that does not touch attempt_log (a claim) joins its rows and
-- inserts nothing. A folded "unavailable" entry (its count went up) is a new
-- attempt, and a new event.
CREATE OR REPLACE FUNCTION dlq.record_attempt_events() RETURNS TRIGGER AS $$
BEGIN
    INSERT INTO dlq.dlq_events (message_id, at, kind, detail, uid)
    SELECT n.id,
           -- The entry's own time (the latest of a folded one): attempt_log
           -- is written by lifecycled only, with RFC 3339 times.
           COALESCE(n.attempt_log -> -1 ->> 'last_at', n.attempt_log -> -1 ->> 'at', n.updated_at::text)::timestamptz,
           CASE n.attempt_log -> -1 ->> 'outcome' WHEN 'returned' THEN 'returned' WHEN 'revived' THEN 'revived' ELSE 'attempt' END,
           n.attempt_log -> -1,
           CASE WHEN jsonb_typeof(n.attempt_log -> -1 -> 'uid') = 'number' THEN (n.attempt_log -> -1 ->> 'uid')::bigint END
    FROM new_rows n JOIN old_rows o ON o.id = n.id
    WHERE (n.attempt_log -> -1) IS NOT NULL AND (n.attempt_log -> -1) IS DISTINCT FROM (o.attempt_log -> -1)
    ORDER BY n.id;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER trg_dlq_events_attempt AFTER UPDATE ON dlq.dlq_messages
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION dlq.record_attempt_events();

CREATE OR REPLACE FUNCTION dlq.record_archive_event() RETURNS TRIGGER AS $$
BEGIN
    INSERT INTO dlq.dlq_events (message_id, at, kind, detail)
    SELECT id, now(), 'archived', jsonb_build_object('status', status) FROM new_rows ORDER BY id;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER trg_dlq_events_archived AFTER INSERT ON dlq.dlq_messages_archive
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION dlq.record_archive_event();

CREATE OR REPLACE FUNCTION dlq.drop_purged_events() RETURNS TRIGGER AS $$
BEGIN
    DELETE FROM dlq.dlq_events WHERE message_id IN (SELECT id FROM old_rows);
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER trg_dlq_events_purged AFTER DELETE ON dlq.dlq_messages_archive
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION dlq.drop_purged_events();

-- A DLQ topic's pause: while resumed_at is NULL the automatic retry loop
-- claims none of its messages. auto: paused by the loop itself because too
-- many replays came back; uid: the operator's, when paused by hand. A resume
-- sets resumed_at and keeps the row: the auto-pause counts only returns
-- after it, so the returns that caused a pause do not cause the next.
CREATE TABLE IF NOT EXISTS dlq.dlq_topic_pauses (
    dlq_topic  VARCHAR(255) PRIMARY KEY,
    paused_at  TIMESTAMPTZ  NOT NULL,
    reason     TEXT         NOT NULL,
    auto       BOOLEAN      NOT NULL DEFAULT false,
    uid        BIGINT,
    resumed_at TIMESTAMPTZ
);

-- Auto-pause counts a topic's returns within a window.
CREATE INDEX IF NOT EXISTS idx_dlq_events_returned ON dlq.dlq_events (at) WHERE kind = 'returned';
