-- What the broker answered for an item of a bulk retry whose page was
-- recorded by a daemon that had lost the operation meanwhile (its
-- outcomes were written, its progress could not be): the daemon that took
-- the operation over counts the item from this instead of sending the
-- message again. A message's attempt history keeps only its newest
-- entries, so it cannot be what says that the operation sent it.
ALTER TABLE dlq.dlq_operation_items ADD COLUMN IF NOT EXISTS answered TEXT;
ALTER TABLE dlq.dlq_operation_items ADD COLUMN IF NOT EXISTS answered_error TEXT;
