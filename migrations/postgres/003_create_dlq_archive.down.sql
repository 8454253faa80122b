DROP PROCEDURE IF EXISTS dlq.archive_old_dlq_messages(INT, INT);
DROP TABLE IF EXISTS dlq.dlq_messages_archive;
