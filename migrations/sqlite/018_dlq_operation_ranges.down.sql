ALTER TABLE dlq_operations DROP COLUMN done_ranges;
