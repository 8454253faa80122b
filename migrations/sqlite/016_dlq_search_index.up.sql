-- Text search of dead letters (error=, q=) from an FTS5 index filled off
-- the intake path (issue 13; see postgres/016). Maintaining FTS5 in
-- intake's transaction stalled the API (SQLite has one writer) during a big
-- intake; now a trigger only queues each new message's id, and the
-- daemon's search indexer moves small batches into the index.
--
-- dlq_search_docs numbers the indexed messages (FTS5 rowids; a
-- dlq_messages rowid may change on VACUUM). scan = 1 marks a message whose
-- payload or error FTS5 cannot hold as it is (not UTF-8, a NUL byte): a
-- search checks those row by row, like the queued ones.
CREATE TABLE IF NOT EXISTS dlq_search_pending (
    id TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS dlq_search_docs (
    doc  INTEGER PRIMARY KEY,
    id   TEXT    NOT NULL UNIQUE,
    scan INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS idx_dlq_search_docs_scan ON dlq_search_docs (id) WHERE scan = 1;
-- Contentless: the texts are in dlq_messages; the trigram tokenizer makes
-- a phrase a substring match with case folded.
CREATE VIRTUAL TABLE IF NOT EXISTS dlq_search_fts USING fts5(payload, error, tokenize = 'trigram', content = '', contentless_delete = 1);

INSERT INTO dlq_search_pending (id) SELECT id FROM dlq_messages;

CREATE TRIGGER IF NOT EXISTS trg_dlq_search_insert AFTER INSERT ON dlq_messages
BEGIN
    INSERT INTO dlq_search_pending (id) VALUES (NEW.id);
END;
CREATE TRIGGER IF NOT EXISTS trg_dlq_search_delete AFTER DELETE ON dlq_messages
BEGIN
    DELETE FROM dlq_search_fts WHERE rowid = (SELECT doc FROM dlq_search_docs WHERE id = OLD.id);
    DELETE FROM dlq_search_docs WHERE id = OLD.id;
END;
CREATE TRIGGER IF NOT EXISTS trg_dlq_search_update AFTER UPDATE OF error_message, raw_payload ON dlq_messages
WHEN OLD.error_message IS NOT NEW.error_message OR OLD.raw_payload IS NOT NEW.raw_payload
BEGIN
    DELETE FROM dlq_search_fts WHERE rowid = (SELECT doc FROM dlq_search_docs WHERE id = OLD.id);
    DELETE FROM dlq_search_docs WHERE id = OLD.id;
    INSERT INTO dlq_search_pending (id) VALUES (NEW.id);
END;
