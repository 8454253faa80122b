-- The end of a bulk operation (finish, cancel) counts the answers a daemon
-- that lost the operation recorded for its items (020), in the transaction
-- that holds the operation's row: without an index that read walks every
-- item of the operation (a million for a storm's retry). Answers are rare,
-- so the index is small and an item's insert only checks its predicate.
CREATE INDEX IF NOT EXISTS idx_dlq_operation_items_answered ON dlq.dlq_operation_items (operation_id, seq)
    WHERE answered IS NOT NULL;
