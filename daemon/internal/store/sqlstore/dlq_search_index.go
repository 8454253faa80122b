package sqlstore

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// The text index of dead letters (error=, q=), filled off the intake path
// (migration 016). Intake only queues the ids it
// stores (dlq_search_pending); IndexDLQSearch moves a batch of them into
// the index: dlq_search_text with trigram indexes on PostgreSQL, an FTS5
// trigram table on SQLite. A text filter first asks the index for its
// candidates: the indexed messages whose indexed text matches, and the
// queued (not yet indexed) ones whose own text matches. When there are few,
// the search reads those messages by id; every candidate is checked against
// its own row with the filter's usual condition (TextMatch, ErrorMatch), so
// the results are the same whatever the index holds. When there are many,
// the index would not narrow the search: it walks its ordered indexes and
// checks each row, as it did before there was an index, and stops after a
// page.

// candidateLimit is how many candidates a text filter may have for the
// search to read them by id; above it the filter is checked row by row.
const candidateLimit = 2000

func (s *Store) textCandidateLimit() int {
	if s.SearchCandidates > 0 {
		return s.SearchCandidates
	}
	return candidateLimit
}

// MinIndexedText is the shortest text the trigram indexes can look up:
// shorter ones are checked row by row.
const MinIndexedText = 3

// TextField is what a text filter searches.
type TextField string

const (
	FieldPayload TextField = "payload"
	FieldError   TextField = "error"
)

// Candidates are the live messages a text filter may match; nil when the
// filter is checked row by row instead.
type Candidates []uuid.UUID

// textCandidates returns the candidates of the narrowest text filter of f
// that has few enough (nil: none has).
func (s *Store) textCandidates(ctx context.Context, qr Querier, d *SearchDialect, f dlq.SearchFilter) (Candidates, error) {
	var best Candidates
	for _, t := range []struct {
		field TextField
		text  string
	}{{FieldPayload, f.Text}, {FieldError, f.Error}} {
		if t.text == "" {
			continue
		}
		q := &SearchQuery{d: d}
		src, ok := q.textSource(t.field, t.text)
		if !ok {
			continue
		}
		limit := s.textCandidateLimit()
		ids, err := QueryAll(ctx, qr, scanID, src+" LIMIT "+q.Arg(limit+1), q.args...)
		if err != nil {
			return nil, fmt.Errorf("search dead letters: text index: %w", err)
		}
		// The limit cut the list (repeated ids count): it is not whole.
		if len(ids) > limit {
			continue
		}
		ids = distinct(ids)
		if best == nil || len(ids) < len(best) {
			best = Candidates(ids)
			if best == nil {
				best = Candidates{}
			}
		}
	}
	return best, nil
}

// textSource selects the live messages whose field may match s: the
// indexed ones whose indexed text matches and the unindexed ones whose own
// text does; false when the index cannot look s up.
func (q *SearchQuery) textSource(field TextField, s string) (string, bool) {
	indexed, ok := q.d.Indexed(q, field, s)
	if !ok {
		return "", false
	}
	match := q.d.ErrorMatch
	if field == FieldPayload {
		match = q.d.TextMatch
	}
	return "SELECT * FROM (" + indexed + ") i UNION ALL SELECT id FROM " + q.d.Live + " WHERE id IN (" + q.d.Unindexed + ") AND " +
		match(q, q.d.Live, s), true
}

// broadSource is, for a search whose text filters all have too
// many candidates to read by id and that nothing else narrows but
// statuses, the candidates of one of them as the row source of the live
// messages, each read by id (OFFSET 0 keeps it a nested loop: the planner,
// blind to how many rows the text matches, hashed the whole table):
// counting up to the threshold then stops after that many candidates
// instead of checking rows that cannot match. "" otherwise: where the
// dialect counts every match (CountsCandidates false), and a topic, group, key, time or header narrows the rows
// better than the candidates do.
func (q *SearchQuery) broadSource(f dlq.SearchFilter) string {
	if !q.d.CountsCandidates || f.Topic != "" || f.Group != "" || f.ErrorGroup != "" || f.Key != nil || f.Since != nil || f.Until != nil || len(f.Headers) > 0 {
		return ""
	}
	for _, t := range []struct {
		field TextField
		text  string
	}{{FieldError, f.Error}, {FieldPayload, f.Text}} {
		if t.text == "" {
			continue
		}
		if src, ok := q.textSource(t.field, t.text); ok {
			return "(SELECT id AS cid FROM (" + src + ") s) c CROSS JOIN LATERAL (SELECT * FROM " + q.d.Live +
				" WHERE id = c.cid OFFSET 0) m"
		}
	}
	return ""
}

func scanID(row Scanner) (uuid.UUID, error) {
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

// searchIndexBatchBytes bounds a batch of the search indexer by its
// payloads too (a storm of large binary dead letters): a batch stops at the
// message that crosses it, and takes one message at least.
const searchIndexBatchBytes = 8 << 20

// SearchBatch is the byte bound of a batch of the search indexer.
func (s *Store) SearchBatch() int64 {
	if s.SearchBatchBytes > 0 {
		return s.SearchBatchBytes
	}
	return searchIndexBatchBytes
}

// UnindexedDLQ implements searchindex.Store.
func (s *Store) UnindexedDLQ(ctx context.Context) (int64, error) {
	return s.unindexed(ctx, s.sql.Search.Pending)
}

func (s *Store) unindexed(ctx context.Context, queue string) (int64, error) {
	var n int64
	if err := s.conn.QueryRow(ctx, `SELECT count(*) FROM `+queue).Scan(&n); err != nil {
		return 0, fmt.Errorf("count dead letters waiting for the search index: %w", err)
	}
	return n, nil
}
