-- A null value (a Kafka tombstone) and an empty value are different
-- messages: from now on raw_payload NULL means null, and truncated says
-- that a value was too large to keep, which raw_payload NULL meant until
-- now. Rows stored before keep their meaning: NULL was only ever a
-- truncated message, and an empty value (which then stood for both null and
-- empty) stays empty, which is what it showed.
ALTER TABLE dlq.dlq_messages ADD COLUMN IF NOT EXISTS truncated BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE dlq.dlq_messages_archive ADD COLUMN IF NOT EXISTS truncated BOOLEAN NOT NULL DEFAULT false;
UPDATE dlq.dlq_messages SET truncated = true WHERE raw_payload IS NULL;
UPDATE dlq.dlq_messages_archive SET truncated = true WHERE raw_payload IS NULL;
