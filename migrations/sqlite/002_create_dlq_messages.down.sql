DROP TABLE IF EXISTS dlq_messages_archive;
DROP TABLE IF EXISTS dlq_topic_counts;
DROP TABLE IF EXISTS dlq_messages;
