-- Archive table (seed 004, 003_add_partition_management).
CREATE TABLE IF NOT EXISTS dlq.dlq_messages_archive (
    LIKE dlq.dlq_messages INCLUDING ALL
);

-- The seed's procedure copied a batch and then deleted "a batch" chosen by a
-- second query, which could delete rows that were never copied. Here each
-- batch deletes and inserts the very same rows in one statement, so a row is
-- never removed without being archived. A DBA may CALL it directly; the daemon
-- runs the same statement from its scheduler.
CREATE OR REPLACE PROCEDURE dlq.archive_old_dlq_messages(
    p_retention_days INT DEFAULT 30,
    p_batch_size INT DEFAULT 1000
)
LANGUAGE plpgsql
AS $$
DECLARE
    v_cutoff TIMESTAMPTZ;
    v_archived_count BIGINT := 0;
    v_batch_count INT;
BEGIN
    v_cutoff := NOW() - make_interval(days => p_retention_days);

    LOOP
        WITH to_archive AS (
            SELECT id FROM dlq.dlq_messages
            WHERE status IN ('RESOLVED', 'DEAD') AND updated_at < v_cutoff
            ORDER BY updated_at
            LIMIT p_batch_size
            FOR UPDATE SKIP LOCKED
        ),
        moved AS (
            DELETE FROM dlq.dlq_messages m
            USING to_archive ta
            WHERE m.id = ta.id
            RETURNING m.*
        ),
        archived AS (
            INSERT INTO dlq.dlq_messages_archive
            SELECT * FROM moved
            RETURNING 1
        )
        SELECT COUNT(*) INTO v_batch_count FROM archived;

        v_archived_count := v_archived_count + v_batch_count;
        EXIT WHEN v_batch_count = 0;
        COMMIT;
    END LOOP;

    RAISE NOTICE 'Archived % DLQ messages older than % days',
        v_archived_count, p_retention_days;
END;
$$;
