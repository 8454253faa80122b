-- What the broker answered for an item of a bulk retry whose page was
-- recorded by a daemon that had lost the operation meanwhile (see the
-- PostgreSQL migration 020).
ALTER TABLE dlq_operation_items ADD COLUMN answered TEXT;
ALTER TABLE dlq_operation_items ADD COLUMN answered_error TEXT;
