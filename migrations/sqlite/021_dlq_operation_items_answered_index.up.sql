-- The answers recorded for an operation's items, read at its end (see the
-- PostgreSQL migration 021).
CREATE INDEX IF NOT EXISTS idx_dlq_operation_items_answered ON dlq_operation_items (operation_id, seq)
    WHERE answered IS NOT NULL;
