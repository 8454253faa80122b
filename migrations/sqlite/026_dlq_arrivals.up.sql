-- Arrivals per hour; see postgres/026_dlq_arrivals.up.sql. Times are
-- microseconds since the epoch, hours their UTC hour starts; 176400000000
-- is 49 hours.
CREATE TABLE IF NOT EXISTS dlq_arrivals (
    hour          INTEGER NOT NULL,
    dlq_topic     TEXT    NOT NULL,
    failure_group TEXT    NOT NULL,
    n             INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (hour, dlq_topic, failure_group)
);
INSERT INTO dlq_arrivals (hour, dlq_topic, failure_group, n)
SELECT created_at - created_at % 3600000000, dlq_topic, failure_group, count(*)
FROM dlq_messages WHERE created_at >= CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER) - 176400000000
GROUP BY 1, 2, 3;

-- A delete takes its message off its counter when the counter exists.
CREATE TRIGGER IF NOT EXISTS trg_dlq_arrivals_delete AFTER DELETE ON dlq_messages
BEGIN
    UPDATE dlq_arrivals SET n = n - 1
    WHERE hour = OLD.created_at - OLD.created_at % 3600000000 AND dlq_topic = OLD.dlq_topic AND failure_group = OLD.failure_group;
END;
-- The failure-group backfill moves a message between counters when its
-- hour is still counted (the old hour's counter is there).
CREATE TRIGGER IF NOT EXISTS trg_dlq_arrivals_move AFTER UPDATE OF failure_group, dlq_topic, created_at ON dlq_messages
WHEN OLD.failure_group <> NEW.failure_group OR OLD.dlq_topic <> NEW.dlq_topic OR OLD.created_at <> NEW.created_at
BEGIN
    UPDATE dlq_arrivals SET n = n - 1
    WHERE hour = OLD.created_at - OLD.created_at % 3600000000 AND dlq_topic = OLD.dlq_topic AND failure_group = OLD.failure_group;
    INSERT INTO dlq_arrivals (hour, dlq_topic, failure_group, n)
    SELECT NEW.created_at - NEW.created_at % 3600000000, NEW.dlq_topic, NEW.failure_group, 1
    WHERE EXISTS (SELECT 1 FROM dlq_arrivals WHERE hour = OLD.created_at - OLD.created_at % 3600000000
        AND dlq_topic = OLD.dlq_topic AND failure_group = OLD.failure_group)
    ON CONFLICT (hour, dlq_topic, failure_group) DO UPDATE SET n = n + 1;
END;
