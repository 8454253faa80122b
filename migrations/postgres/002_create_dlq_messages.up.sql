-- Dead letters (seed 004 schema) plus the columns correctness needs:
-- the source position (unique, so a redelivered message is stored once), the
-- raw key, headers and payload (republished byte for byte), the next automatic
-- retry time and the lease of whoever is republishing it.
CREATE TABLE IF NOT EXISTS dlq.dlq_messages (
    id               UUID         PRIMARY KEY DEFAULT gen_random_uuid(),
    original_topic   VARCHAR(255) NOT NULL,
    error_message    TEXT         NOT NULL,
    retry_count      INT          NOT NULL DEFAULT 0,
    max_retries      INT          NOT NULL DEFAULT 3,
    payload          JSONB,
    status           VARCHAR(50)  NOT NULL DEFAULT 'PENDING',
    created_at       TIMESTAMPTZ  NOT NULL DEFAULT NOW(),
    updated_at       TIMESTAMPTZ  NOT NULL DEFAULT NOW(),
    last_retry_at    TIMESTAMPTZ,
    source           TEXT         NOT NULL DEFAULT '',
    dlq_topic        VARCHAR(255) NOT NULL DEFAULT '',
    source_partition INT          NOT NULL DEFAULT 0,
    source_offset    BIGINT       NOT NULL DEFAULT 0,
    message_key      BYTEA,
    -- JSON array of {key, value(base64)}, kept as bytes: parsing it into
    -- jsonb on every insert costs intake throughput and nothing queries it.
    headers          BYTEA        NOT NULL DEFAULT '\x5b5d',
    raw_payload      BYTEA,
    produced_at      TIMESTAMPTZ,
    next_retry_at    TIMESTAMPTZ,
    lease_owner      TEXT,
    lease_expires_at TIMESTAMPTZ,
    last_feedback    TEXT,

    CONSTRAINT chk_dlq_messages_status CHECK (status IN ('PENDING', 'RETRYING', 'RESOLVED', 'DEAD')),
    CONSTRAINT chk_dlq_messages_retry_count CHECK (retry_count >= 0 AND max_retries >= 0),
    CONSTRAINT uq_dlq_messages_position UNIQUE (source, dlq_topic, source_partition, source_offset)
);

-- Listing by topic (newest first, a backward scan) and retry-all (oldest
-- first from a cursor) match either the DLQ topic or the original topic;
-- each has its own ordered index, so both are index scans.
CREATE INDEX IF NOT EXISTS idx_dlq_messages_original_topic ON dlq.dlq_messages (original_topic, created_at, id);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_dlq_topic ON dlq.dlq_messages (dlq_topic, created_at, id);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_status ON dlq.dlq_messages (status);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_created_at ON dlq.dlq_messages (created_at);
-- Due automatic retries.
CREATE INDEX IF NOT EXISTS idx_dlq_messages_due ON dlq.dlq_messages (next_retry_at) WHERE status = 'PENDING';
-- Expired leases.
CREATE INDEX IF NOT EXISTS idx_dlq_messages_leases ON dlq.dlq_messages (lease_expires_at) WHERE status = 'RETRYING';
-- Retention candidates.
CREATE INDEX IF NOT EXISTS idx_dlq_messages_finished ON dlq.dlq_messages (updated_at) WHERE status IN ('RESOLVED', 'DEAD');

-- The WHEN clause is evaluated without calling the function, so statements
-- that set updated_at themselves (all of lifecycled's) pay nothing per row.
CREATE TRIGGER trg_dlq_messages_updated_at
    BEFORE UPDATE ON dlq.dlq_messages
    FOR EACH ROW WHEN (NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at)
    EXECUTE FUNCTION dlq.update_updated_at();

-- Per-topic, per-status counts, so that total_count and the topic summary
-- never count a million rows per request. UPDATE and DELETE keep them with
-- statement-level triggers (whoever runs them, a DBA's CALL included);
-- inserts come only from lifecycled's intake, which adds its rows to the
-- counts in the same statement: a trigger would copy every inserted row,
-- payload and all, into a transition table, which costs a quarter of the
-- intake's throughput.
CREATE TABLE IF NOT EXISTS dlq.dlq_topic_counts (
    dlq_topic      VARCHAR(255) NOT NULL,
    original_topic VARCHAR(255) NOT NULL,
    status         VARCHAR(50)  NOT NULL,
    n              BIGINT       NOT NULL DEFAULT 0,
    PRIMARY KEY (dlq_topic, original_topic, status)
);

-- One statement per trigger call, keys in sorted order, so that concurrent
-- transactions lock counter rows in the same order and cannot deadlock on them.
CREATE OR REPLACE FUNCTION dlq.count_rows() RETURNS TRIGGER AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO dlq.dlq_topic_counts AS c (dlq_topic, original_topic, status, n)
        SELECT dlq_topic, original_topic, status, count(*) FROM new_rows
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (dlq_topic, original_topic, status) DO UPDATE SET n = c.n + EXCLUDED.n;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO dlq.dlq_topic_counts AS c (dlq_topic, original_topic, status, n)
        SELECT dlq_topic, original_topic, status, -count(*) FROM old_rows
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (dlq_topic, original_topic, status) DO UPDATE SET n = c.n + EXCLUDED.n;
    ELSE
        INSERT INTO dlq.dlq_topic_counts AS c (dlq_topic, original_topic, status, n)
        SELECT dlq_topic, original_topic, status, sum(d) FROM (
            SELECT dlq_topic, original_topic, status, -1 AS d FROM old_rows
            UNION ALL
            SELECT dlq_topic, original_topic, status, 1 AS d FROM new_rows
        ) delta
        GROUP BY 1, 2, 3 HAVING sum(d) <> 0 ORDER BY 1, 2, 3
        ON CONFLICT (dlq_topic, original_topic, status) DO UPDATE SET n = c.n + EXCLUDED.n;
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER trg_dlq_counts_update AFTER UPDATE ON dlq.dlq_messages
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION dlq.count_rows();
CREATE TRIGGER trg_dlq_counts_delete AFTER DELETE ON dlq.dlq_messages
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION dlq.count_rows();
