ALTER TABLE dlq.dlq_operation_items DROP COLUMN IF EXISTS answered_error;
ALTER TABLE dlq.dlq_operation_items DROP COLUMN IF EXISTS answered;
