-- Back to 004. Lossy where 004 cannot hold what 005 can:
-- * a header key that is not UTF-8 becomes the text "base64:<its base64>";
-- * of archived rows sharing a position, only the newest is kept, so that
--   the position can be unique again;
-- * last_error, attempt_log and republished_at are dropped.
-- Headers are handled as json text, not jsonb: a UTF-8 key may hold \u0000,
-- which jsonb (and json field access) refuses.
UPDATE dlq.dlq_messages SET headers = convert_to((
    SELECT COALESCE(json_agg(CASE WHEN position('"key_b64"' IN h::text) > 0
            THEN json_build_object('key', 'base64:' || (h->>'key_b64'), 'value', h->'value')
            ELSE h END ORDER BY i), '[]'::json)::text
    FROM json_array_elements(convert_from(headers, 'UTF8')::json) WITH ORDINALITY AS e(h, i)), 'UTF8')
WHERE position('"key_b64"' IN convert_from(headers, 'UTF8')) > 0;

UPDATE dlq.dlq_messages_archive SET headers = convert_to((
    SELECT COALESCE(json_agg(CASE WHEN position('"key_b64"' IN h::text) > 0
            THEN json_build_object('key', 'base64:' || (h->>'key_b64'), 'value', h->'value')
            ELSE h END ORDER BY i), '[]'::json)::text
    FROM json_array_elements(convert_from(headers, 'UTF8')::json) WITH ORDINALITY AS e(h, i)), 'UTF8')
WHERE position('"key_b64"' IN convert_from(headers, 'UTF8')) > 0;

DELETE FROM dlq.dlq_messages_archive a
USING dlq.dlq_messages_archive b
WHERE a.source = b.source AND a.dlq_topic = b.dlq_topic AND a.source_partition = b.source_partition
    AND a.source_offset = b.source_offset AND (a.updated_at, a.id) < (b.updated_at, b.id);

DROP INDEX IF EXISTS dlq.idx_dlq_messages_archive_position;
ALTER TABLE dlq.dlq_messages_archive
    ADD CONSTRAINT dlq_messages_archive_source_dlq_topic_source_partition_sour_key
    UNIQUE (source, dlq_topic, source_partition, source_offset);

ALTER TABLE dlq.dlq_messages_archive
    DROP COLUMN republished_at,
    DROP COLUMN attempt_log,
    DROP COLUMN last_error;
ALTER TABLE dlq.dlq_messages
    DROP COLUMN republished_at,
    DROP COLUMN attempt_log,
    DROP COLUMN last_error;
