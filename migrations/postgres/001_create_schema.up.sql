-- Schemas and the shared updated_at trigger function (seed 004, 001_create_schema).
-- gen_random_uuid() is built into PostgreSQL 13+, so pgcrypto is not needed and
-- the state-store role does not need the right to create extensions.
CREATE SCHEMA IF NOT EXISTS dlq;
CREATE SCHEMA IF NOT EXISTS lifecycle;

-- Sets updated_at on every UPDATE unless the statement set it explicitly
-- (which backfills and tests of the retention boundaries need).
CREATE OR REPLACE FUNCTION dlq.update_updated_at()
RETURNS TRIGGER AS $$
BEGIN
    IF NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at THEN
        NEW.updated_at = clock_timestamp();
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
