DROP TABLE IF EXISTS dlq.dlq_operation_items;
DROP TABLE IF EXISTS dlq.dlq_operations;
