DROP TABLE IF EXISTS dlq_topic_pauses;
DROP TRIGGER IF EXISTS trg_dlq_events_purged;
DROP TRIGGER IF EXISTS trg_dlq_events_archived;
DROP TRIGGER IF EXISTS trg_dlq_events_attempt;
DROP TABLE IF EXISTS dlq_events;
