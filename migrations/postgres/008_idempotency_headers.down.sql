ALTER TABLE lifecycle.idempotency_keys DROP COLUMN IF EXISTS response_headers;
