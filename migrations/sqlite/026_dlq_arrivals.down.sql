-- See postgres/026_dlq_arrivals.down.sql.
DROP TRIGGER IF EXISTS trg_dlq_arrivals_move;
DROP TRIGGER IF EXISTS trg_dlq_arrivals_delete;
DROP TABLE IF EXISTS dlq_arrivals;
