-- The arrivals are counted from the messages again by the up migration.
DROP TRIGGER IF EXISTS trg_dlq_arrivals_move ON dlq.dlq_messages;
DROP TRIGGER IF EXISTS trg_dlq_arrivals_delete ON dlq.dlq_messages;
DROP FUNCTION IF EXISTS dlq.count_arrivals_moved();
DROP FUNCTION IF EXISTS dlq.count_arrivals_deleted();
DROP TABLE IF EXISTS dlq.dlq_arrivals;
