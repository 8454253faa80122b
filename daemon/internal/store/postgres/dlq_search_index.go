package postgres

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"
)

// pgIndexed selects the indexed messages whose indexed text matches s, as
// the live row's condition would (the payload in escape encoding); one
// queued again is left to the unindexed part, so that no message is
// selected twice.
func pgIndexed(q *sqlstore.SearchQuery, field sqlstore.TextField, s string) (string, bool) {
	if utf8.RuneCountInString(s) < sqlstore.MinIndexedText {
		return "", false
	}
	if field == sqlstore.FieldPayload {
		s = pgEscapeEncode([]byte(s))
	} else if !pgText(s) {
		return "", false // matches no error text (pgSearch.ErrorMatch)
	}
	return "SELECT id FROM dlq.dlq_search_text s WHERE " + string(field) + " ILIKE " + q.Arg("%"+sqlstore.LikeEscape(s)+"%") +
		" AND NOT EXISTS (SELECT 1 FROM dlq.dlq_search_pending p WHERE p.id = s.id)", true
}

// pgIds is the condition that a message is one of ids.
func pgIds(q *sqlstore.SearchQuery, ids sqlstore.Candidates) string {
	return "id = ANY(" + q.Arg([]uuid.UUID(ids)) + "::uuid[])"
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

// IndexDLQSearch implements sqlstore.Driver.
func (p *driver) IndexDLQSearch(ctx context.Context, params sqlstore.IndexDLQSearchParams) (int, error) {
	var done int
	err := p.conn.Tx(ctx, func(q sqlstore.Querier) error {
		if err := q.QueryRow(ctx, pgIndexSearch, pgSearchIndexBatch, params.MaxBytes).Scan(&done); err != nil {
			return fmt.Errorf("index dead letters for search: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return done, nil
}

// pgSearchIndexBatch is how many queued messages one pass of the search
// indexer takes at most.
const pgSearchIndexBatch = 2000
