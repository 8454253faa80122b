-- A replayed answer gives back the headers that matter (Location of a 202).
ALTER TABLE idempotency_keys ADD COLUMN response_headers TEXT;
