DROP INDEX IF EXISTS dlq.idx_dlq_operation_items_answered;
