DROP TABLE IF EXISTS dlq.dlq_messages;
DROP TABLE IF EXISTS dlq.dlq_topic_counts;
DROP FUNCTION IF EXISTS dlq.count_rows();
