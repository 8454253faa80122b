-- The history trigger (011) joins a statement's old and new rows on id.
-- The planner knows nothing of a transition table's size and estimates one
-- row on each side, so it chose a nested loop: every statement compared
-- each new row with each old row, quadratic in the rows it changed. A bulk
-- retry's page of 250 spent 18 ms of its claim and again of its outcome in
-- that join; a hash join over the same rows takes well under one.
ALTER FUNCTION dlq.record_attempt_events() SET enable_nestloop = off;
