-- A null value and an empty value are different messages: see the
-- PostgreSQL migration 022.
ALTER TABLE dlq_messages ADD COLUMN truncated INTEGER NOT NULL DEFAULT 0;
ALTER TABLE dlq_messages_archive ADD COLUMN truncated INTEGER NOT NULL DEFAULT 0;
UPDATE dlq_messages SET truncated = 1 WHERE raw_payload IS NULL;
UPDATE dlq_messages_archive SET truncated = 1 WHERE raw_payload IS NULL;
