-- Plugin protocol 3: a dead letter's position is opaque to the daemon
-- (bytes the source defines, and how operators see them), and the source
-- reports the message's origin. Kafka's partition and offset become the
-- log position sdk.LogPosition makes: 4 bytes of partition and 8 of
-- offset, big-endian, shown as p<partition>@<offset>, so a redelivery of a
-- message stored before this migration is still recognised, whichever
-- protocol the plugin speaks.
ALTER TABLE dlq.dlq_messages
    ADD COLUMN source_position  BYTEA,
    ADD COLUMN position_display TEXT    NOT NULL DEFAULT '',
    ADD COLUMN error_class      TEXT    NOT NULL DEFAULT '',
    ADD COLUMN failed_attempts  INT     NOT NULL DEFAULT 0,
    ADD COLUMN first_failed_at  TIMESTAMPTZ,
    ADD COLUMN origin_from      TEXT    NOT NULL DEFAULT '',
    ADD COLUMN origin_configured BOOLEAN NOT NULL DEFAULT false;
-- Same columns at the same places: archiving copies rows with SELECT *.
ALTER TABLE dlq.dlq_messages_archive
    ADD COLUMN source_position  BYTEA,
    ADD COLUMN position_display TEXT    NOT NULL DEFAULT '',
    ADD COLUMN error_class      TEXT    NOT NULL DEFAULT '',
    ADD COLUMN failed_attempts  INT     NOT NULL DEFAULT 0,
    ADD COLUMN first_failed_at  TIMESTAMPTZ,
    ADD COLUMN origin_from      TEXT    NOT NULL DEFAULT '',
    ADD COLUMN origin_configured BOOLEAN NOT NULL DEFAULT false;
-- The position is not a change of the message: updated_at (retention's
-- clock) stays as it was.
ALTER TABLE dlq.dlq_messages DISABLE TRIGGER trg_dlq_messages_updated_at;
UPDATE dlq.dlq_messages SET source_position = int4send(source_partition) || int8send(source_offset),
    position_display = 'p' || source_partition || '@' || source_offset;
ALTER TABLE dlq.dlq_messages ENABLE TRIGGER trg_dlq_messages_updated_at;
UPDATE dlq.dlq_messages_archive SET source_position = int4send(source_partition) || int8send(source_offset),
    position_display = 'p' || source_partition || '@' || source_offset;
ALTER TABLE dlq.dlq_messages ALTER COLUMN source_position SET NOT NULL;
ALTER TABLE dlq.dlq_messages_archive ALTER COLUMN source_position SET NOT NULL;

ALTER TABLE dlq.dlq_messages DROP CONSTRAINT uq_dlq_messages_position;
DROP INDEX IF EXISTS dlq.idx_dlq_messages_undigested;
DROP INDEX IF EXISTS dlq.idx_dlq_messages_archive_position;
ALTER TABLE dlq.dlq_messages DROP COLUMN source_partition, DROP COLUMN source_offset;
ALTER TABLE dlq.dlq_messages_archive DROP COLUMN source_partition, DROP COLUMN source_offset;
ALTER TABLE dlq.dlq_messages ADD CONSTRAINT uq_dlq_messages_position
    UNIQUE (source, dlq_topic, source_position, content_digest);
CREATE INDEX IF NOT EXISTS idx_dlq_messages_undigested ON dlq.dlq_messages
    (source, dlq_topic, source_position) WHERE content_digest = '\x';
CREATE INDEX IF NOT EXISTS idx_dlq_messages_archive_position
    ON dlq.dlq_messages_archive (source, dlq_topic, source_position);

ALTER TABLE dlq.dlq_returns ADD COLUMN source_position BYTEA;
UPDATE dlq.dlq_returns SET source_position = int4send(source_partition) || int8send(source_offset);
ALTER TABLE dlq.dlq_returns ALTER COLUMN source_position SET NOT NULL;
ALTER TABLE dlq.dlq_returns DROP CONSTRAINT dlq_returns_pkey;
ALTER TABLE dlq.dlq_returns DROP COLUMN source_partition, DROP COLUMN source_offset;
ALTER TABLE dlq.dlq_returns ADD PRIMARY KEY (source, dlq_topic, source_position, content_digest);

-- The deliveries of a source with per-delivery positions (AMQP) that were
-- stored but whose acknowledgement has not been confirmed: the broker
-- delivers those again, flagged, and a redelivery with the same digest
-- takes one of them instead of being stored again (one for one, so two
-- identical messages stay two). A confirmed Commit removes its rows.
-- committing: a Commit of it was sent and its outcome is not known (the
-- daemon stopped, or the source could not tell): it may have been
-- acknowledged, so no redelivery takes it (a redelivery is then stored
-- again: a duplicate, never another identical message lost).
CREATE TABLE IF NOT EXISTS dlq.dlq_unacked (
    source          TEXT        NOT NULL,
    dlq_topic       TEXT        NOT NULL,
    source_position BYTEA       NOT NULL,
    content_digest  BYTEA       NOT NULL,
    message_id      UUID        NOT NULL,
    stored_at       TIMESTAMPTZ NOT NULL,
    committing      BOOLEAN     NOT NULL DEFAULT false,
    PRIMARY KEY (source, dlq_topic, source_position)
);
CREATE INDEX IF NOT EXISTS idx_dlq_unacked_digest ON dlq.dlq_unacked (source, dlq_topic, content_digest);
CREATE INDEX IF NOT EXISTS idx_dlq_unacked_stored ON dlq.dlq_unacked (stored_at);
