ALTER TABLE dlq.dlq_operations DROP COLUMN IF EXISTS done_ranges;
