package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// The text index of dead letters (error=, q=), filled off the intake path
// (migrations postgres/016 and sqlite/014). Intake only queues the ids it
// stores (dlq_search_pending); IndexDLQSearch moves a batch of them into
// the index: dlq_search_text with trigram indexes on PostgreSQL, an FTS5
// trigram table on SQLite. A text filter first asks the index for its
// candidates: the indexed messages whose indexed text matches, and the
// queued (not yet indexed) ones whose own text matches. When there are few,
// the search reads those messages by id; every candidate is checked against
// its own row with the filter's usual condition (textMatch, errorMatch), so
// the results are the same whatever the index holds. When there are many,
// the index would not narrow the search: it walks its ordered indexes and
// checks each row, as it did before there was an index, and stops after a
// page.

// candidateLimit is how many candidates a text filter may have for the
// search to read them by id; above it the filter is checked row by row.
const candidateLimit = 2000

func (s *sqlStore) textCandidateLimit() int {
	if s.searchCandidates > 0 {
		return s.searchCandidates
	}
	return candidateLimit
}

// minIndexedText is the shortest text the trigram indexes can look up:
// shorter ones are checked row by row.
const minIndexedText = 3

// textField is what a text filter searches.
type textField string

const (
	fieldPayload textField = "payload"
	fieldError   textField = "error"
)

// candidates are the live messages a text filter may match; nil when the
// filter is checked row by row instead.
type candidates []uuid.UUID

// textCandidates returns the candidates of the narrowest text filter of f
// that has few enough (nil: none has).
func (s *sqlStore) textCandidates(ctx context.Context, qr querier, d *searchDialect, f dlq.SearchFilter) (candidates, error) {
	var best candidates
	for _, t := range []struct {
		field textField
		text  string
	}{{fieldPayload, f.Text}, {fieldError, f.Error}} {
		if t.text == "" {
			continue
		}
		q := &searchQuery{d: d}
		src, ok := q.textSource(t.field, t.text)
		if !ok {
			continue
		}
		limit := s.textCandidateLimit()
		ids, err := queryAll(ctx, qr, scanID, src+" LIMIT "+q.arg(limit+1), q.args...)
		if err != nil {
			return nil, fmt.Errorf("search dead letters: text index: %w", err)
		}
		// The limit cut the list (repeated ids count): it is not whole.
		if len(ids) > limit {
			continue
		}
		ids = distinct(ids)
		if best == nil || len(ids) < len(best) {
			best = candidates(ids)
			if best == nil {
				best = candidates{}
			}
		}
	}
	return best, nil
}

// textSource selects the live messages whose field may match s: the
// indexed ones whose indexed text matches and the unindexed ones whose own
// text does; false when the index cannot look s up.
func (q *searchQuery) textSource(field textField, s string) (string, bool) {
	indexed, ok := q.d.indexed(q, field, s)
	if !ok {
		return "", false
	}
	match := q.d.errorMatch
	if field == fieldPayload {
		match = q.d.textMatch
	}
	return "SELECT * FROM (" + indexed + ") i UNION ALL SELECT id FROM " + q.d.live + " WHERE id IN (" + q.d.unindexed + ") AND " +
		match(q, q.d.live, s), true
}

// broadSource is, for a PostgreSQL search whose text filters all have too
// many candidates to read by id and that nothing else narrows but
// statuses, the candidates of one of them as the row source of the live
// messages, each read by id (OFFSET 0 keeps it a nested loop: the planner,
// blind to how many rows the text matches, hashed the whole table):
// counting up to the threshold then stops after that many candidates
// instead of checking rows that cannot match. "" otherwise: SQLite counts
// every match, and a topic, group, key, time or header narrows the rows
// better than the candidates do.
func (q *searchQuery) broadSource(f dlq.SearchFilter) string {
	if !q.d.postgres || f.Topic != "" || f.Group != "" || f.Key != nil || f.Since != nil || f.Until != nil || len(f.Headers) > 0 {
		return ""
	}
	for _, t := range []struct {
		field textField
		text  string
	}{{fieldError, f.Error}, {fieldPayload, f.Text}} {
		if t.text == "" {
			continue
		}
		if src, ok := q.textSource(t.field, t.text); ok {
			return "(SELECT id AS cid FROM (" + src + ") s) c CROSS JOIN LATERAL (SELECT * FROM " + q.d.live +
				" WHERE id = c.cid OFFSET 0) m"
		}
	}
	return ""
}

func scanID(row scanner) (uuid.UUID, error) {
	var id uuid.UUID
	err := row.Scan(&id)
	return id, err
}

// distinct drops repeated ids (a message indexed and queued again).
func distinct(ids []uuid.UUID) []uuid.UUID {
	seen := make(map[uuid.UUID]bool, len(ids))
	out := ids[:0]
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// pgIndexed selects the indexed messages whose indexed text matches s, as
// the live row's condition would (the payload in escape encoding); one
// queued again is left to the unindexed part, so that no message is
// selected twice.
func pgIndexed(q *searchQuery, field textField, s string) (string, bool) {
	if utf8.RuneCountInString(s) < minIndexedText {
		return "", false
	}
	if field == fieldPayload {
		s = pgEscapeEncode([]byte(s))
	} else if !pgText(s) {
		return "", false // matches no error text (pgSearch.errorMatch)
	}
	return "SELECT id FROM dlq.dlq_search_text s WHERE " + string(field) + " ILIKE " + q.arg("%"+likeEscape(s)+"%") +
		" AND NOT EXISTS (SELECT 1 FROM dlq.dlq_search_pending p WHERE p.id = s.id)", true
}

// sqliteIndexed selects the indexed messages whose text may match s: an
// FTS5 phrase of trigrams is a substring, with case folded (a superset of
// LIKE's ASCII folding). Text FTS5 cannot look up (a NUL, invalid UTF-8,
// fewer than three characters) is checked row by row.
func sqliteIndexed(q *searchQuery, field textField, s string) (string, bool) {
	if utf8.RuneCountInString(s) < minIndexedText || !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
		return "", false
	}
	phrase := string(field) + ` : "` + strings.ReplaceAll(s, `"`, `""`) + `"`
	return "SELECT d.id FROM dlq_search_fts f JOIN dlq_search_docs d ON d.doc = f.rowid WHERE dlq_search_fts MATCH " + q.arg(phrase), true
}

// sqliteIds is the condition that a message is one of ids.
func sqliteIds(q *searchQuery, ids candidates) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = id.String()
	}
	b, _ := json.Marshal(s) // strings always encode
	return "id IN (SELECT value FROM json_each(" + q.arg(string(b)) + "))"
}

// pgIds is the condition that a message is one of ids.
func pgIds(q *searchQuery, ids candidates) string {
	return "id = ANY(" + q.arg([]uuid.UUID(ids)) + "::uuid[])"
}

// How many queued messages one pass of the search indexer takes at most:
// SQLite, whose one connection serves the API too, takes fewer so that a
// pass never holds it long.
const (
	pgSearchIndexBatch     = 2000
	sqliteSearchIndexBatch = 500
	// searchIndexBatchBytes bounds a batch by its payloads too (a storm
	// of large binary dead letters): a batch stops at the message that
	// crosses it, and takes one message at least.
	searchIndexBatchBytes = 8 << 20
)

// searchBytes is the byte bound of a batch of the search indexer.
func (s *sqlStore) searchBytes() int64 {
	if s.searchBatchBytes > 0 {
		return s.searchBatchBytes
	}
	return searchIndexBatchBytes
}

// pgIndexSearch moves a batch of queued messages into dlq_search_text in
// one statement. SKIP LOCKED lets daemons sharing the store take different
// batches. A message queued again while this runs keeps its new queue row
// (not in this statement's snapshot), so it is indexed once more.
const pgIndexSearch = `
	WITH queued AS (
		SELECT ctid AS qc, id FROM dlq.dlq_search_pending LIMIT $1 FOR UPDATE SKIP LOCKED
	), sized AS (
		SELECT q.qc, COALESCE(octet_length(m.raw_payload), 0) + octet_length(COALESCE(m.error_message, '')) AS len,
			sum(COALESCE(octet_length(m.raw_payload), 0) + octet_length(COALESCE(m.error_message, '')))
				OVER (ORDER BY q.qc) AS upto
		FROM queued q LEFT JOIN dlq.dlq_messages m ON m.id = q.id
	), batch AS (
		DELETE FROM dlq.dlq_search_pending
		WHERE ctid = ANY(ARRAY(SELECT qc FROM sized WHERE upto - len < $2))
		RETURNING id
	), indexed AS (
		INSERT INTO dlq.dlq_search_text (id, payload, error)
		SELECT m.id, COALESCE(encode(m.raw_payload, 'escape'), ''), m.error_message
		FROM dlq.dlq_messages m WHERE m.id IN (SELECT id FROM batch)
		ORDER BY m.id
		ON CONFLICT (id) DO UPDATE SET payload = EXCLUDED.payload, error = EXCLUDED.error
	)
	SELECT count(*) FROM batch`

// IndexDLQSearch implements dlq.SearchIndexStore.
func (p *Postgres) IndexDLQSearch(ctx context.Context) (int, int64, error) {
	var done int
	var queued int64
	err := p.db.tx(ctx, func(q querier) error {
		if err := q.queryRow(ctx, pgIndexSearch, pgSearchIndexBatch, p.searchBytes()).Scan(&done); err != nil {
			return fmt.Errorf("index dead letters for search: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	queued, err = p.UnindexedDLQ(ctx)
	return done, queued, err
}

// UnindexedDLQ implements dlq.SearchIndexStore.
func (p *Postgres) UnindexedDLQ(ctx context.Context) (int64, error) {
	return p.unindexed(ctx, "dlq.dlq_search_pending")
}

// UnindexedDLQ implements dlq.SearchIndexStore.
func (s *SQLite) UnindexedDLQ(ctx context.Context) (int64, error) {
	return s.unindexed(ctx, "dlq_search_pending")
}

func (s *sqlStore) unindexed(ctx context.Context, queue string) (int64, error) {
	var n int64
	if err := s.db.queryRow(ctx, `SELECT count(*) FROM `+queue).Scan(&n); err != nil {
		return 0, fmt.Errorf("count dead letters waiting for the search index: %w", err)
	}
	return n, nil
}

// IndexDLQSearch implements dlq.SearchIndexStore. The texts are checked
// here: a payload or error FTS5 cannot hold as it is (invalid UTF-8, a
// NUL) is not indexed but marked scan, and a search checks such messages
// row by row.
func (s *SQLite) IndexDLQSearch(ctx context.Context) (int, int64, error) {
	var done int
	err := s.db.tx(ctx, func(q querier) error {
		type queuedRow struct {
			seq     int64
			id      string
			live    bool
			payload []byte
			errText string
		}
		rows, err := queryAll(ctx, q, func(r scanner) (queuedRow, error) {
			var v queuedRow
			var errText *string
			err := r.Scan(&v.seq, &v.id, &v.live, &v.payload, &errText)
			if errText != nil {
				v.errText = *errText
			}
			return v, err
		}, `SELECT s.seq, s.id, m.id IS NOT NULL, m.raw_payload, m.error_message FROM (
				SELECT seq, id FROM (
					SELECT p.rowid AS seq, p.id, COALESCE(length(m.raw_payload), 0) + COALESCE(length(m.error_message), 0) AS len,
						sum(COALESCE(length(m.raw_payload), 0) + COALESCE(length(m.error_message), 0)) OVER (ORDER BY p.rowid) AS upto
					FROM (SELECT rowid, id FROM dlq_search_pending ORDER BY rowid LIMIT ?1) p LEFT JOIN dlq_messages m ON m.id = p.id
				) WHERE upto - len < ?2
			) s LEFT JOIN dlq_messages m ON m.id = s.id ORDER BY s.seq`, sqliteSearchIndexBatch, s.searchBytes())
		if err != nil {
			return fmt.Errorf("index dead letters for search: %w", err)
		}
		seen := map[string]bool{}
		for _, r := range rows {
			done++
			if !r.live || seen[r.id] {
				continue
			}
			seen[r.id] = true
			if _, err := q.exec(ctx, `DELETE FROM dlq_search_fts WHERE rowid = (SELECT doc FROM dlq_search_docs WHERE id = ?1)`, r.id); err != nil {
				return fmt.Errorf("index dead letters for search: %w", err)
			}
			if _, err := q.exec(ctx, `DELETE FROM dlq_search_docs WHERE id = ?1`, r.id); err != nil {
				return fmt.Errorf("index dead letters for search: %w", err)
			}
			scan := !ftsText(r.payload) || !ftsText([]byte(r.errText))
			var doc int64
			if err := q.queryRow(ctx, `INSERT INTO dlq_search_docs (id, scan) VALUES (?1, ?2) RETURNING doc`, r.id, scan).Scan(&doc); err != nil {
				return fmt.Errorf("index dead letters for search: %w", err)
			}
			if scan {
				continue
			}
			if _, err := q.exec(ctx, `INSERT INTO dlq_search_fts (rowid, payload, error) VALUES (?1, ?2, ?3)`,
				doc, string(r.payload), r.errText); err != nil {
				return fmt.Errorf("index dead letters for search: %w", err)
			}
		}
		if len(rows) > 0 {
			if _, err := q.exec(ctx, `DELETE FROM dlq_search_pending WHERE rowid <= ?1`, rows[len(rows)-1].seq); err != nil {
				return fmt.Errorf("index dead letters for search: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	queued, err := s.UnindexedDLQ(ctx)
	return done, queued, err
}

// ftsText reports whether FTS5 can index b as it is: UTF-8 without a NUL
// (SQLite's LIKE stops at a NUL, so the search checks such text itself).
func ftsText(b []byte) bool {
	return utf8.Valid(b) && !strings.ContainsRune(string(b), 0)
}
