DROP TABLE IF EXISTS dlq_operation_items;
DROP TABLE IF EXISTS dlq_operations;
