-- Before 022 raw_payload NULL meant truncated: a null value goes back to
-- empty, as it was stored then.
UPDATE dlq.dlq_messages SET raw_payload = '\x' WHERE raw_payload IS NULL AND NOT truncated;
UPDATE dlq.dlq_messages_archive SET raw_payload = '\x' WHERE raw_payload IS NULL AND NOT truncated;
ALTER TABLE dlq.dlq_messages DROP COLUMN IF EXISTS truncated;
ALTER TABLE dlq.dlq_messages_archive DROP COLUMN IF EXISTS truncated;
