-- Dead-letter search and failure groups (issue 13, items 1 and 2).
--
-- failure_group is the id of the message's failure group (dlq.FailureGroup:
-- normalised error text, original topic, exception class), computed by the
-- daemon at intake. Rows stored before this migration get theirs lazily:
-- the daemon backfills rows with an empty group in batches (the partial
-- index below finds them, and empties as they are done). The archive gets
-- the same column at the same place: archiving copies rows with SELECT *.
ALTER TABLE dlq.dlq_messages ADD COLUMN IF NOT EXISTS failure_group TEXT NOT NULL DEFAULT '';
ALTER TABLE dlq.dlq_messages_archive ADD COLUMN IF NOT EXISTS failure_group TEXT NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS idx_dlq_messages_ungrouped ON dlq.dlq_messages (id) WHERE failure_group = '';

-- One row per failure group ever seen: what it looks like and when.
CREATE TABLE IF NOT EXISTS dlq.dlq_failure_groups (
    id              TEXT        PRIMARY KEY,
    pattern         TEXT        NOT NULL,
    exception_class TEXT        NOT NULL DEFAULT '',
    sample_error    TEXT        NOT NULL,
    first_seen      TIMESTAMPTZ NOT NULL,
    last_seen       TIMESTAMPTZ NOT NULL
);

-- Live messages per group, topic and status, so that the groups list never
-- counts a million rows per request. Kept like dlq_topic_counts: intake
-- adds its rows in its own statement, statement-level triggers follow
-- every UPDATE and DELETE.
CREATE TABLE IF NOT EXISTS dlq.dlq_group_counts (
    group_id       TEXT         NOT NULL,
    dlq_topic      VARCHAR(255) NOT NULL,
    original_topic VARCHAR(255) NOT NULL,
    status         VARCHAR(50)  NOT NULL,
    n              BIGINT       NOT NULL DEFAULT 0,
    PRIMARY KEY (group_id, dlq_topic, original_topic, status)
);
INSERT INTO dlq.dlq_group_counts (group_id, dlq_topic, original_topic, status, n)
SELECT failure_group, dlq_topic, original_topic, status, count(*) FROM dlq.dlq_messages GROUP BY 1, 2, 3, 4
ON CONFLICT (group_id, dlq_topic, original_topic, status) DO UPDATE SET n = EXCLUDED.n;

-- Keys in sorted order, one statement per call (see dlq.count_rows).
CREATE OR REPLACE FUNCTION dlq.count_group_rows() RETURNS TRIGGER AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO dlq.dlq_group_counts AS c (group_id, dlq_topic, original_topic, status, n)
        SELECT failure_group, dlq_topic, original_topic, status, -count(*) FROM old_rows
        GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
        ON CONFLICT (group_id, dlq_topic, original_topic, status) DO UPDATE SET n = c.n + EXCLUDED.n;
    ELSE
        INSERT INTO dlq.dlq_group_counts AS c (group_id, dlq_topic, original_topic, status, n)
        SELECT failure_group, dlq_topic, original_topic, status, sum(d) FROM (
            SELECT failure_group, dlq_topic, original_topic, status, -1 AS d FROM old_rows
            UNION ALL
            SELECT failure_group, dlq_topic, original_topic, status, 1 AS d FROM new_rows
        ) delta
        GROUP BY 1, 2, 3, 4 HAVING sum(d) <> 0 ORDER BY 1, 2, 3, 4
        ON CONFLICT (group_id, dlq_topic, original_topic, status) DO UPDATE SET n = c.n + EXCLUDED.n;
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER trg_dlq_group_counts_update AFTER UPDATE ON dlq.dlq_messages
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION dlq.count_group_rows();
CREATE TRIGGER trg_dlq_group_counts_delete AFTER DELETE ON dlq.dlq_messages
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION dlq.count_group_rows();

-- Search: every query is split into one branch per (topic column, status),
-- each an ordered walk of one of these indexes from the cursor, merged. The
-- single-column status and created_at indexes of the seed served no query
-- that these do not serve better.
CREATE INDEX IF NOT EXISTS idx_dlq_messages_search_dlq_topic ON dlq.dlq_messages (dlq_topic, status, created_at, id);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_search_original_topic ON dlq.dlq_messages (original_topic, status, created_at, id);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_search_group ON dlq.dlq_messages (failure_group, status, created_at, id);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_search_status ON dlq.dlq_messages (status, created_at, id);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_search_key ON dlq.dlq_messages (message_key) WHERE message_key IS NOT NULL;
DROP INDEX IF EXISTS dlq.idx_dlq_messages_status;
DROP INDEX IF EXISTS dlq.idx_dlq_messages_created_at;

-- Substring search of the error text and the payload (error=, q=) uses
-- trigram indexes when pg_trgm can be installed (it ships with PostgreSQL's
-- contrib and is a trusted extension: a database owner may create it).
-- Without it the same queries run, scanning instead: the warning says so,
-- and docs/reference.md says how to check (\dx pg_trgm).
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
EXCEPTION WHEN OTHERS THEN
    RAISE WARNING 'pg_trgm is not available (%): dead-letter error and payload searches will scan', SQLERRM;
END
$$;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        EXECUTE 'CREATE INDEX IF NOT EXISTS idx_dlq_messages_error_trgm ON dlq.dlq_messages USING gin (error_message gin_trgm_ops)';
        -- No trigram index of the payload by default: it doubled the time
        -- of intake (bench/results/*-intake-ab.txt), and intake keeps up
        -- with a storm first. docs/reference.md gives the statement for
        -- operators who want q= fast more than intake.
    END IF;
END
$$;
