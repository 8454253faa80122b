-- Dead-letter search and failure groups; see
-- postgres/010_dlq_search_groups.up.sql for what the columns and tables
-- mean. Rows stored before this migration get their group lazily (the
-- daemon backfills rows with an empty group).
ALTER TABLE dlq_messages ADD COLUMN failure_group TEXT NOT NULL DEFAULT '';
ALTER TABLE dlq_messages_archive ADD COLUMN failure_group TEXT NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS idx_dlq_messages_ungrouped ON dlq_messages (id) WHERE failure_group = '';

CREATE TABLE IF NOT EXISTS dlq_failure_groups (
    id              TEXT    PRIMARY KEY,
    pattern         TEXT    NOT NULL,
    exception_class TEXT    NOT NULL DEFAULT '',
    sample_error    TEXT    NOT NULL,
    first_seen      INTEGER NOT NULL,
    last_seen       INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS dlq_group_counts (
    group_id       TEXT    NOT NULL,
    dlq_topic      TEXT    NOT NULL,
    original_topic TEXT    NOT NULL,
    status         TEXT    NOT NULL,
    n              INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (group_id, dlq_topic, original_topic, status)
);
INSERT INTO dlq_group_counts (group_id, dlq_topic, original_topic, status, n)
SELECT failure_group, dlq_topic, original_topic, status, count(*) FROM dlq_messages GROUP BY 1, 2, 3, 4;

-- Intake adds its rows to the counts once per batch (a row trigger cost a
-- third of the embedded store's intake); deletes and updates, whoever runs
-- them, are followed by these triggers.
CREATE TRIGGER IF NOT EXISTS trg_dlq_group_counts_delete AFTER DELETE ON dlq_messages
BEGIN
    UPDATE dlq_group_counts SET n = n - 1
    WHERE group_id = OLD.failure_group AND dlq_topic = OLD.dlq_topic AND original_topic = OLD.original_topic
        AND status = OLD.status;
END;
CREATE TRIGGER IF NOT EXISTS trg_dlq_group_counts_update AFTER UPDATE OF status, dlq_topic, original_topic, failure_group ON dlq_messages
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

-- Search indexes: one ordered walk per (topic column, status) branch.
CREATE INDEX IF NOT EXISTS idx_dlq_messages_search_dlq_topic ON dlq_messages (dlq_topic, status, created_at, id);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_search_original_topic ON dlq_messages (original_topic, status, created_at, id);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_search_group ON dlq_messages (failure_group, status, created_at, id);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_search_status ON dlq_messages (status, created_at, id);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_search_key ON dlq_messages (message_key) WHERE message_key IS NOT NULL;
DROP INDEX IF EXISTS idx_dlq_messages_status;
DROP INDEX IF EXISTS idx_dlq_messages_created_at;

-- Substring search of the payload (q=) scans (LIKE) on SQLite. An FTS5
-- trigram index was tried: filled by a trigger inside intake's transaction,
-- it held SQLite's one connection so long during a storm of arbitrary
-- (binary, large) dead letters that the API timed out, and it doubled the
-- cost of intake. An index filled off the intake path is left for later.
