-- A bulk retry records each page when its broker answered, not in order
-- (issue 13: one row version per message, pages recorded side by side).
-- position stays the end of the run of items done from the first; done_ranges
-- holds the runs recorded beyond it, as [{"after":N,"upto":M}, ...], so that
-- a resumed run skips them and no page is counted twice.
ALTER TABLE dlq.dlq_operations ADD COLUMN IF NOT EXISTS done_ranges JSONB NOT NULL DEFAULT '[]';
