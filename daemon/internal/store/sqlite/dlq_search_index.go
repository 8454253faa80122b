package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"
)

// sqliteSearchIndexBatch is how many queued messages one pass of the search
// indexer takes at most: fewer than PostgreSQL, since SQLite's one
// connection serves the API too, so that a pass never holds it long.
const sqliteSearchIndexBatch = 500

// sqliteIndexed selects the indexed messages whose text may match s: an
// FTS5 phrase of trigrams is a substring, with case folded (a superset of
// LIKE's ASCII folding). Text FTS5 cannot look up (a NUL, invalid UTF-8,
// fewer than three characters) is checked row by row.
func sqliteIndexed(q *sqlstore.SearchQuery, field sqlstore.TextField, s string) (string, bool) {
	if utf8.RuneCountInString(s) < sqlstore.MinIndexedText || !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
		return "", false
	}
	phrase := string(field) + ` : "` + strings.ReplaceAll(s, `"`, `""`) + `"`
	return "SELECT d.id FROM dlq_search_fts f JOIN dlq_search_docs d ON d.doc = f.rowid WHERE dlq_search_fts MATCH " + q.Arg(phrase), true
}

// sqliteIds is the condition that a message is one of ids.
func sqliteIds(q *sqlstore.SearchQuery, ids sqlstore.Candidates) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = id.String()
	}
	b, _ := json.Marshal(s) // strings always encode
	return "id IN (SELECT value FROM json_each(" + q.Arg(string(b)) + "))"
}

// IndexDLQSearch implements sqlstore.Driver. The texts are checked
// here: a payload or error FTS5 cannot hold as it is (invalid UTF-8, a
// NUL) is not indexed but marked scan, and a search checks such messages
// row by row.
func (s *driver) IndexDLQSearch(ctx context.Context, params sqlstore.IndexDLQSearchParams) (int, error) {
	var done int
	err := s.conn.Tx(ctx, func(q sqlstore.Querier) error {
		type queuedRow struct {
			seq     int64
			id      string
			live    bool
			payload []byte
			errText string
		}
		rows, err := sqlstore.QueryAll(ctx, q, func(r sqlstore.Scanner) (queuedRow, error) {
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
			) s LEFT JOIN dlq_messages m ON m.id = s.id ORDER BY s.seq`, sqliteSearchIndexBatch, params.MaxBytes)
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
			if _, err := q.Exec(ctx, `DELETE FROM dlq_search_fts WHERE rowid = (SELECT doc FROM dlq_search_docs WHERE id = ?1)`, r.id); err != nil {
				return fmt.Errorf("index dead letters for search: %w", err)
			}
			if _, err := q.Exec(ctx, `DELETE FROM dlq_search_docs WHERE id = ?1`, r.id); err != nil {
				return fmt.Errorf("index dead letters for search: %w", err)
			}
			scan := !ftsText(r.payload) || !ftsText([]byte(r.errText))
			var doc int64
			if err := q.QueryRow(ctx, `INSERT INTO dlq_search_docs (id, scan) VALUES (?1, ?2) RETURNING doc`, r.id, scan).Scan(&doc); err != nil {
				return fmt.Errorf("index dead letters for search: %w", err)
			}
			if scan {
				continue
			}
			if _, err := q.Exec(ctx, `INSERT INTO dlq_search_fts (rowid, payload, error) VALUES (?1, ?2, ?3)`,
				doc, string(r.payload), r.errText); err != nil {
				return fmt.Errorf("index dead letters for search: %w", err)
			}
		}
		if len(rows) > 0 {
			if _, err := q.Exec(ctx, `DELETE FROM dlq_search_pending WHERE rowid <= ?1`, rows[len(rows)-1].seq); err != nil {
				return fmt.Errorf("index dead letters for search: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return done, nil
}

// ftsText reports whether FTS5 can index b as it is: UTF-8 without a NUL
// (SQLite's LIKE stops at a NUL, so the search checks such text itself).
func ftsText(b []byte) bool {
	return utf8.Valid(b) && !strings.ContainsRune(string(b), 0)
}
