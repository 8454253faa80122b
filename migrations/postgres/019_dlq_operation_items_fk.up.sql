-- An operation's items are written once, with the operation, by the
-- statement that creates it, and an operation is never deleted: the
-- foreign key to dlq_operations guarded nothing a bulk operation does,
-- and its per-row check cost more than the insert itself (0.77 s of 1.22 s
-- for a set of 100,000, measured on the bench VM), before the first
-- message of a retry-all could be sent.
ALTER TABLE dlq.dlq_operation_items DROP CONSTRAINT IF EXISTS dlq_operation_items_operation_id_fkey;
