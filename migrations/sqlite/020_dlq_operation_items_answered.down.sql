ALTER TABLE dlq_operation_items DROP COLUMN answered_error;
ALTER TABLE dlq_operation_items DROP COLUMN answered;
