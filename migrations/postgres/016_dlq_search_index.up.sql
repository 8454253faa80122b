-- Text search of dead letters (error=, q=) from an index filled off the
-- intake path (issue 13). A trigram index on dlq_messages itself was
-- maintained by every intake statement: the error-text one alone took about
-- half of intake's time, the payload one doubled it
-- (bench/results/*-intake-ab.txt, *-search-index.txt).
--
-- Intake now only queues the ids of what it stored in dlq_search_pending
-- (no index: an append); the daemon's search indexer moves them, a batch at
-- a time, into dlq_search_text, whose trigram indexes serve the searches.
-- A search takes its candidates from dlq_search_text and from the queued
-- messages themselves (the tail not yet indexed), and checks each candidate
-- against the live row, so results are exact whatever the indexer's lag.
--
-- The invariant the search relies on: a live message whose text differs
-- from its dlq_search_text row (or has none) is queued. Intake queues in
-- its own statement; the update trigger below queues a message whose error
-- or payload changes, in the same transaction. Rows inserted into
-- dlq_messages by other means must be queued by whoever inserts them.
CREATE TABLE IF NOT EXISTS dlq.dlq_search_pending (
    id UUID NOT NULL
);
-- Frequent vacuum: the indexer deletes what it indexed, and a search reads
-- the whole queue.
ALTER TABLE dlq.dlq_search_pending SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);

-- payload: the payload's bytes as encode(raw_payload, 'escape') gives them
-- (the expression the search has always matched q against), error: the
-- error text.
CREATE TABLE IF NOT EXISTS dlq.dlq_search_text (
    id      UUID PRIMARY KEY,
    payload TEXT NOT NULL,
    error   TEXT NOT NULL
);

-- Messages stored before this migration are indexed lazily, like any new
-- ones.
INSERT INTO dlq.dlq_search_pending (id) SELECT id FROM dlq.dlq_messages;

DROP INDEX IF EXISTS dlq.idx_dlq_messages_error_trgm;

-- The seed's (topic, created_at, id) indexes: every query that walked them
-- (the list route, retry-all's claim, the topics summary) walks the
-- (topic, status, created_at, id) ones of migration 010 instead, one walk
-- per status, and each index less is an insert less for intake.
DROP INDEX IF EXISTS dlq.idx_dlq_messages_original_topic;
DROP INDEX IF EXISTS dlq.idx_dlq_messages_dlq_topic;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        EXECUTE 'CREATE INDEX IF NOT EXISTS idx_dlq_search_text_payload ON dlq.dlq_search_text USING gin (payload gin_trgm_ops)';
        EXECUTE 'CREATE INDEX IF NOT EXISTS idx_dlq_search_text_error ON dlq.dlq_search_text USING gin (error gin_trgm_ops)';
    ELSE
        RAISE WARNING 'pg_trgm is not installed: dead-letter error and payload searches will scan';
    END IF;
END
$$;

-- Deleted and archived messages leave the index with them (the queue is
-- not touched: the indexer skips ids it no longer finds).
CREATE OR REPLACE FUNCTION dlq.search_forget() RETURNS TRIGGER AS $$
BEGIN
    DELETE FROM dlq.dlq_search_text s USING old_rows o WHERE s.id = o.id;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER trg_dlq_search_delete AFTER DELETE ON dlq.dlq_messages
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION dlq.search_forget();

-- A message whose text changes (a returning replay's new error) is queued
-- again and its stale row dropped. The WHEN clause is evaluated without
-- calling the function, and only statements that set these columns check
-- it: retries and their outcomes pay nothing.
CREATE OR REPLACE FUNCTION dlq.search_requeue() RETURNS TRIGGER AS $$
BEGIN
    DELETE FROM dlq.dlq_search_text WHERE id = NEW.id;
    INSERT INTO dlq.dlq_search_pending (id) VALUES (NEW.id);
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER trg_dlq_search_update AFTER UPDATE OF error_message, raw_payload ON dlq.dlq_messages
    FOR EACH ROW WHEN (OLD.error_message IS DISTINCT FROM NEW.error_message OR OLD.raw_payload IS DISTINCT FROM NEW.raw_payload)
    EXECUTE FUNCTION dlq.search_requeue();
