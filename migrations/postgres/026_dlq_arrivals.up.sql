-- Arrivals per hour (issue 32's scale run): the live messages of each DLQ
-- topic and failure group taken in per hour, so that the topics list, the
-- overview and the groups list read 24 rows per topic and group instead of
-- counting every message of the last 24 hours at every request (342 ms at
-- 1M stored with 120k of them recent, every 5 s from each open console).
-- Kept like dlq_group_counts: intake adds its rows in its own statement;
-- a delete (an operator's, the archive's move) takes its rows off, and a
-- failure group given to an old message moves its row. Hours are UTC hour
-- starts. Hours older than two days are dropped by the retention pass.
CREATE TABLE IF NOT EXISTS dlq.dlq_arrivals (
    hour          TIMESTAMPTZ  NOT NULL,
    dlq_topic     VARCHAR(255) NOT NULL,
    failure_group TEXT         NOT NULL,
    n             BIGINT       NOT NULL DEFAULT 0,
    PRIMARY KEY (hour, dlq_topic, failure_group)
);
INSERT INTO dlq.dlq_arrivals (hour, dlq_topic, failure_group, n)
SELECT to_timestamp(floor(extract(epoch FROM created_at) / 3600) * 3600), dlq_topic, failure_group, count(*)
FROM dlq.dlq_messages WHERE created_at >= now() - interval '49 hours' GROUP BY 1, 2, 3
ON CONFLICT (hour, dlq_topic, failure_group) DO UPDATE SET n = EXCLUDED.n;

-- A delete takes its messages off the counters that exist: an hour the
-- retention pass dropped is outside every window read, and a move of
-- month-old messages to the archive writes nothing. Keys in sorted order,
-- as the other counters' triggers take them.
CREATE OR REPLACE FUNCTION dlq.count_arrivals_deleted() RETURNS TRIGGER AS $$
BEGIN
    INSERT INTO dlq.dlq_arrivals AS a (hour, dlq_topic, failure_group, n)
    SELECT d.hour, d.dlq_topic, d.failure_group, d.n FROM (
        SELECT to_timestamp(floor(extract(epoch FROM created_at) / 3600) * 3600) AS hour, dlq_topic, failure_group, -count(*) AS n
        FROM old_rows GROUP BY 1, 2, 3
    ) d
    WHERE EXISTS (SELECT 1 FROM dlq.dlq_arrivals x WHERE x.hour = d.hour AND x.dlq_topic = d.dlq_topic AND x.failure_group = d.failure_group)
    ORDER BY 1, 2, 3
    ON CONFLICT (hour, dlq_topic, failure_group) DO UPDATE SET n = a.n + EXCLUDED.n;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER trg_dlq_arrivals_delete AFTER DELETE ON dlq.dlq_messages
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION dlq.count_arrivals_deleted();

-- Only the failure-group backfill changes a message's group (from ''): a
-- row trigger on the counted columns, which no other UPDATE fires. The
-- message moves between counters when its hour is still counted.
CREATE OR REPLACE FUNCTION dlq.count_arrivals_moved() RETURNS TRIGGER AS $$
BEGIN
    UPDATE dlq.dlq_arrivals SET n = n - 1
    WHERE hour = to_timestamp(floor(extract(epoch FROM OLD.created_at) / 3600) * 3600)
        AND dlq_topic = OLD.dlq_topic AND failure_group = OLD.failure_group;
    IF FOUND THEN
        INSERT INTO dlq.dlq_arrivals AS a (hour, dlq_topic, failure_group, n)
        VALUES (to_timestamp(floor(extract(epoch FROM NEW.created_at) / 3600) * 3600), NEW.dlq_topic, NEW.failure_group, 1)
        ON CONFLICT (hour, dlq_topic, failure_group) DO UPDATE SET n = a.n + 1;
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER trg_dlq_arrivals_move AFTER UPDATE OF failure_group, dlq_topic, created_at ON dlq.dlq_messages
    FOR EACH ROW WHEN (OLD.failure_group IS DISTINCT FROM NEW.failure_group OR OLD.dlq_topic IS DISTINCT FROM NEW.dlq_topic
        OR OLD.created_at IS DISTINCT FROM NEW.created_at)
    EXECUTE FUNCTION dlq.count_arrivals_moved();
