DROP TABLE IF EXISTS dlq.dlq_topic_pauses;
DROP TRIGGER IF EXISTS trg_dlq_events_purged ON dlq.dlq_messages_archive;
DROP TRIGGER IF EXISTS trg_dlq_events_archived ON dlq.dlq_messages_archive;
DROP TRIGGER IF EXISTS trg_dlq_events_attempt ON dlq.dlq_messages;
DROP FUNCTION IF EXISTS dlq.drop_purged_events();
DROP FUNCTION IF EXISTS dlq.record_archive_event();
DROP FUNCTION IF EXISTS dlq.record_attempt_events();
DROP TABLE IF EXISTS dlq.dlq_events;
