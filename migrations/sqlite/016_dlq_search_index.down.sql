DROP TRIGGER IF EXISTS trg_dlq_search_update;
DROP TRIGGER IF EXISTS trg_dlq_search_delete;
DROP TRIGGER IF EXISTS trg_dlq_search_insert;
DROP TABLE IF EXISTS dlq_search_fts;
DROP INDEX IF EXISTS idx_dlq_search_docs_scan;
DROP TABLE IF EXISTS dlq_search_docs;
DROP TABLE IF EXISTS dlq_search_pending;
