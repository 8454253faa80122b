ALTER TABLE dlq.dlq_operation_items ADD CONSTRAINT dlq_operation_items_operation_id_fkey
    FOREIGN KEY (operation_id) REFERENCES dlq.dlq_operations (id) ON DELETE CASCADE;
