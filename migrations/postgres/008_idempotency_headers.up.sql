-- A replayed answer gives back the headers that matter (Location of a 202).
ALTER TABLE lifecycle.idempotency_keys ADD COLUMN IF NOT EXISTS response_headers TEXT;
