-- The actions of a bulk operation are declared once, in Go
-- (dlq.OperationActions), which checks an action before it is stored: the
-- table does not list them again, so that a new action needs no migration.
ALTER TABLE dlq.dlq_operations DROP CONSTRAINT IF EXISTS dlq_operations_action_check;
