-- Before 022 raw_payload NULL meant truncated: a null value goes back to
-- empty, as it was stored then.
UPDATE dlq_messages SET raw_payload = x'' WHERE raw_payload IS NULL AND truncated = 0;
UPDATE dlq_messages_archive SET raw_payload = x'' WHERE raw_payload IS NULL AND truncated = 0;
ALTER TABLE dlq_messages DROP COLUMN truncated;
ALTER TABLE dlq_messages_archive DROP COLUMN truncated;
