-- Dead-letter integrity.
--
-- last_error: why the last republish of a message did not resolve it (the
-- broker's refusal, an unavailable source, a replay that came back).
-- attempt_log: its history of republish attempts, returns and revives, the
-- newest 50, shown as "attempts" in the admin API.
-- republished_at: when the broker last acknowledged a republish. A message
-- that comes back with an x-dlq-id updates that record only if it is set
-- (and only on the record's own DLQ topic); a copied header starts a new one.
--
-- Header keys are bytes. The headers column holds a JSON array of
-- {"key": "<text>", "value": "<base64>"}, with {"key_b64": "<base64>"} in
-- place of "key" for a key that is not UTF-8. Rows written before this
-- migration hold only the first form (their keys were UTF-8 text), so none
-- is rewritten.
ALTER TABLE dlq.dlq_messages
    ADD COLUMN last_error     TEXT,
    ADD COLUMN attempt_log    JSONB NOT NULL DEFAULT '[]',
    ADD COLUMN republished_at TIMESTAMPTZ;

-- Same columns in the same order: archiving copies rows with SELECT *.
ALTER TABLE dlq.dlq_messages_archive
    ADD COLUMN last_error     TEXT,
    ADD COLUMN attempt_log    JSONB NOT NULL DEFAULT '[]',
    ADD COLUMN republished_at TIMESTAMPTZ;

-- An archived position stays known: intake skips positions found here, so
-- a consumer group that reads them again (group_id changed, offsets reset)
-- does not make them new dead letters. The position is no longer unique in
-- the archive, so that an archive pass can never fail on a position that
-- was stored twice before this migration (or by a re-read racing the pass).
DO $$
DECLARE
    c record;
BEGIN
    FOR c IN SELECT conname FROM pg_constraint
             WHERE conrelid = 'dlq.dlq_messages_archive'::regclass AND contype = 'u' LOOP
        EXECUTE format('ALTER TABLE dlq.dlq_messages_archive DROP CONSTRAINT %I', c.conname);
    END LOOP;
END
$$;
CREATE INDEX IF NOT EXISTS idx_dlq_messages_archive_position
    ON dlq.dlq_messages_archive (source, dlq_topic, source_partition, source_offset);
