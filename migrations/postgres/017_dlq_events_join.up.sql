-- The history trigger (011) joins a statement's old and new rows on id.
-- The planner knows nothing of a transition table's size and estimates one
-- row on each side, so it chose a nested loop: every statement compared
-- each new row with each old row, quadratic in the rows it changed. A bulk
-- retry's page of 250 spent 18 ms of its claim and again of its outcome in
-- that join; a hash join over the same rows takes well under one.
ALTER FUNCTION dlq.record_attempt_events() SET enable_nestloop = off;

-- Triggers on one event fire in name order. The counts triggers (002, 010)
-- lock the topic's and the group's counter rows until the transaction
-- ends, so every other transaction changing messages of the topic waits
-- from there on: the history's insert goes first, outside that wait.
ALTER TRIGGER trg_dlq_events_attempt ON dlq.dlq_messages RENAME TO trg_dlq_attempt_events;
