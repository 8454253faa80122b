-- A bulk retry records each page when its broker answered, not in order.
-- position stays the end of the run of items done from the first; done_ranges
-- holds the runs recorded beyond it, as [{"after":N,"upto":M}, ...], so that
-- a resumed run skips them and no page is counted twice.
ALTER TABLE dlq_operations ADD COLUMN done_ranges TEXT NOT NULL DEFAULT '[]';
