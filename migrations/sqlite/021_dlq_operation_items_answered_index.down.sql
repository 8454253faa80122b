DROP INDEX IF EXISTS idx_dlq_operation_items_answered;
