package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// Search across topics (GET /api/v1/dlq/messages). A search is split into
// branches, one per (table, topic column, status): each has equality on the
// leading columns of one index (dlq_topic|original_topic|failure_group|
// status, then created_at, id), so it is an ordered index walk from the
// cursor that stops after limit+1 rows, and the branches are merged. A
// topic matches the DLQ topic or the original topic, like every other
// route; a message whose original topic is its DLQ topic is found once.

// searchDialect is what differs between the dialects' search SQL.
type searchDialect struct {
	postgres              bool
	live, archive         string
	groups, groupCounts   string
	topicCounts           string
	placeholder           func(n int) string
	errorMatch, textMatch func(d *searchQuery, table, substr string) string
	headerMatch           func(d *searchQuery, h dlq.HeaderFilter) string
	// The text index (dlq_search_index.go): the indexed messages whose
	// text may match, false when the index cannot look the text up; the
	// messages not indexed yet; the condition that a message is one of ids.
	indexed   func(q *searchQuery, field textField, substr string) (string, bool)
	unindexed string
	ids       func(q *searchQuery, ids candidates) string
}

// TotalThreshold is how many matches a search counts exactly; above it the
// total is an estimate (PostgreSQL's planner) and marked as one.
const TotalThreshold = 10000

var pgSearch = searchDialect{
	postgres: true, live: "dlq.dlq_messages", archive: "dlq.dlq_messages_archive",
	groups: "dlq.dlq_failure_groups", groupCounts: "dlq.dlq_group_counts", topicCounts: "dlq.dlq_topic_counts",
	placeholder: func(n int) string { return "$" + strconv.Itoa(n) },
	// Checked on each row (the text index narrows the rows to check) with
	// strpos on lower(): what ILIKE does in a UTF-8 database, but the
	// planner takes it for a third of the rows instead of a handful (it has
	// no statistics of the expression), so a broad text walks the ordered
	// index and stops after a page instead of sorting every match.
	errorMatch: func(q *searchQuery, _ string, s string) string {
		if !pgText(s) {
			// A text column holds neither: no error text can hold s (and
			// PostgreSQL refuses s as a text argument).
			return "FALSE"
		}
		return "strpos(lower(error_message), lower(" + q.arg(s) + "::text)) > 0"
	},
	// The payload's bytes with their ASCII letters lowered, and the query's
	// the same way: lower() on the escape encoding (what the trigram
	// index's expression holds) changes only ASCII letters, and decoding
	// it back compares bytes. Compared in the escape encoding, a match
	// could start inside an escape: "\x00 text" (\000 text) was found in
	// the ASCII text `\000 text` (\\000 text), "7377" in the byte 0xff
	// before "377" (\377377).
	textMatch: func(q *searchQuery, _ string, s string) string {
		return "position(decode(lower(" + q.arg(pgEscapeEncode([]byte(s))) + "::text), 'escape') IN " +
			"decode(lower(encode(raw_payload, 'escape')), 'escape')) > 0"
	},
	// jsonb refuses the \u0000 of a stored header name that holds a NUL,
	// and a search that read such a row failed: such rows (encoding/json
	// wrote them; jsonb can hold none) are matched on their JSON text.
	headerMatch: func(q *searchQuery, h dlq.HeaderFilter) string {
		text := "strpos(convert_from(headers, 'UTF8'), " + q.arg(storedHeaderText(h)) + ") > 0"
		if strings.ContainsRune(h.Name, 0) {
			return text
		}
		return "CASE WHEN strpos(convert_from(headers, 'UTF8'), '\\u0000') = 0 THEN convert_from(headers, 'UTF8')::jsonb @> " +
			q.arg(headerContains(h)) + "::jsonb ELSE " + text + " END"
	},
	indexed: pgIndexed, unindexed: "SELECT id FROM dlq.dlq_search_pending", ids: pgIds,
}

var sqliteSearch = searchDialect{
	live: "dlq_messages", archive: "dlq_messages_archive",
	groups: "dlq_failure_groups", groupCounts: "dlq_group_counts", topicCounts: "dlq_topic_counts",
	placeholder: func(n int) string { return "?" + strconv.Itoa(n) },
	errorMatch: func(q *searchQuery, _ string, s string) string {
		if !likeSafe(s) {
			// LIKE stops reading its pattern at a NUL: "%x\0y%" would be
			// "%x", every error that ends with x (see likeSafe).
			return "instr(CAST(error_message AS BLOB), CAST(" + q.arg(s) + " AS BLOB)) > 0"
		}
		return "error_message LIKE " + q.arg("%"+likeEscape(s)+"%") + ` ESCAPE '\'`
	},
	textMatch: func(q *searchQuery, table, s string) string {
		return sqliteTextMatch(q, table, s)
	},
	headerMatch: func(q *searchQuery, h dlq.HeaderFilter) string {
		field, stored := storedName(h.Name)
		cond := "json_extract(h.value, '$." + field + "') = " + q.arg(stored)
		if h.Value != nil {
			cond += " AND json_extract(h.value, '$.value') = " + q.arg(base64.StdEncoding.EncodeToString([]byte(*h.Value)))
		}
		return "EXISTS (SELECT 1 FROM json_each(headers) h WHERE " + cond + ")"
	},
	indexed:   sqliteIndexed,
	unindexed: "SELECT id FROM dlq_search_pending UNION ALL SELECT id FROM dlq_search_docs WHERE scan = 1",
	ids:       sqliteIds,
}

// sqliteTextMatch checks a payload's bytes, ASCII letters lowered on both
// sides (SQLite's lower() changes those only and keeps every other byte,
// a NUL included), as PostgreSQL does. LIKE would stop reading its pattern
// at a NUL, stop reading the payload at one, and read bad bytes as
// characters: a lone 0xa9 as U+00A9, an overlong E0 83 A9 as U+00E9, others
// as U+FFFD, which filters holding those characters then matched.
func sqliteTextMatch(q *searchQuery, _ string, s string) string {
	return "instr(CAST(lower(CAST(raw_payload AS TEXT)) AS BLOB), CAST(lower(" + q.arg(s) + ") AS BLOB)) > 0"
}

// likeSafe reports whether SQLite's LIKE finds s as the bytes it holds:
// LIKE stops reading its pattern at a NUL, and reads a bad byte (of the
// pattern or of the text) as U+FFFD, so that "\xff" and "\ufffd" matched
// every payload holding either.
func likeSafe(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0) && !strings.ContainsRune(s, utf8.RuneError)
}

// pgText reports whether PostgreSQL takes s as text: valid UTF-8 without
// a NUL.
func pgText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// likeEscape makes s match itself in a LIKE pattern whose escape is \.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// pgEscapeEncode is encode(b, 'escape'): NUL and bytes above 0x7f as \ooo,
// backslashes doubled, the rest as they are.
func pgEscapeEncode(b []byte) string {
	var sb strings.Builder
	for _, c := range b {
		switch {
		case c == '\\':
			sb.WriteString(`\\`)
		case c == 0 || c >= 0x80:
			fmt.Fprintf(&sb, `\%03o`, c)
		default:
			sb.WriteByte(c)
		}
	}
	return sb.String()
}

// headerContains is the JSON a headers column contains when it has h:
// keys as text, values as base64 (see storedHeader).
func headerContains(h dlq.HeaderFilter) string {
	name, stored := storedName(h.Name)
	m := map[string]string{name: stored}
	if h.Value != nil {
		m["value"] = base64.StdEncoding.EncodeToString([]byte(*h.Value))
	}
	b, _ := json.Marshal([]map[string]string{m}) // strings always encode
	return string(b)
}

// storedHeaderText is the text headersJSON writes for a header h matches:
// its name, then its value's base64 or (no value in h) the start of any.
// A string's quote and a brace are escaped inside a JSON string, so this
// is found only at a header's start.
func storedHeaderText(h dlq.HeaderFilter) string {
	field, stored := storedName(h.Name)
	name, _ := json.Marshal(stored) // strings always encode
	start := `{"` + field + `":` + string(name) + `,"value":`
	if h.Value == nil {
		return start
	}
	value, _ := json.Marshal(base64.StdEncoding.EncodeToString([]byte(*h.Value)))
	return start + string(value) + `}`
}

// searchQuery builds one statement and its arguments.
type searchQuery struct {
	d    *searchDialect
	args []any
	// cand, when not nil, are the only live messages that can match (the
	// text index's candidates); else source, when set, selects them.
	cand   candidates
	source string
}

func (q *searchQuery) arg(v any) string {
	q.args = append(q.args, v)
	return q.d.placeholder(len(q.args))
}

// branchConds are the WHERE conditions of every branch of f on table but
// the leading index columns and the cursor.
func (q *searchQuery) commonConds(f dlq.SearchFilter, table string) []string {
	var c []string
	if f.Group != "" {
		c = append(c, "failure_group = "+q.arg(f.Group))
	}
	if f.Key != nil {
		c = append(c, "message_key = "+q.arg([]byte(*f.Key)))
	}
	if f.Since != nil {
		c = append(c, "created_at >= "+q.arg(*f.Since))
	}
	if f.Until != nil {
		c = append(c, "created_at < "+q.arg(*f.Until))
	}
	if f.Error != "" {
		c = append(c, q.d.errorMatch(q, table, f.Error))
	}
	if f.Text != "" {
		c = append(c, q.d.textMatch(q, table, f.Text))
	}
	for _, h := range f.Headers {
		c = append(c, q.d.headerMatch(q, h))
	}
	return c
}

// branches returns the WHERE clause of every branch: one per table, topic
// column and status.
func (q *searchQuery) branches(f dlq.SearchFilter) []struct{ table, where string } {
	tables := []string{q.d.live}
	if f.IncludeArchived {
		tables = append(tables, q.d.archive)
	}
	statuses := f.Statuses
	if len(statuses) == 0 {
		statuses = dlq.Statuses
	}
	var out []struct{ table, where string }
	for _, table := range tables {
		if table == q.d.live && q.cand != nil {
			out = append(out, struct{ table, where string }{table, q.candidateBranch(f)})
			continue
		}
		if table == q.d.live && q.source != "" {
			out = append(out, struct{ table, where string }{q.source, q.candidateBranch(f)})
			continue
		}
		topicConds := []string{""}
		if f.Topic != "" {
			t := q.arg(f.Topic)
			topicConds = []string{"dlq_topic = " + t, "original_topic = " + t + " AND dlq_topic <> " + t}
		}
		common := q.commonConds(f, table)
		for _, tc := range topicConds {
			for _, st := range statuses {
				conds := []string{"status = " + q.arg(string(st))}
				if tc != "" {
					conds = append([]string{tc}, conds...)
				}
				conds = append(conds, common...)
				out = append(out, struct{ table, where string }{table, strings.Join(conds, " AND ")})
			}
		}
	}
	return out
}

// candidateBranch is the one branch of the live table when a text filter
// has few candidates (they are read by id, checked and sorted), or when
// its candidates are the row source.
func (q *searchQuery) candidateBranch(f dlq.SearchFilter) string {
	var conds []string
	if q.cand != nil {
		conds = append(conds, q.d.ids(q, q.cand))
	}
	if f.Topic != "" {
		t := q.arg(f.Topic)
		conds = append(conds, "(dlq_topic = "+t+" OR original_topic = "+t+")")
	}
	if len(f.Statuses) > 0 {
		in := make([]string, len(f.Statuses))
		for i, st := range f.Statuses {
			in[i] = q.arg(string(st))
		}
		conds = append(conds, "status IN ("+strings.Join(in, ", ")+")")
	}
	return strings.Join(append(conds, q.commonConds(f, q.d.live)...), " AND ")
}

// search runs a search in one snapshot: the page and its total agree.
func (s *sqlStore) search(ctx context.Context, d *searchDialect, f dlq.SearchFilter) (dlq.SearchPage, error) {
	var page dlq.SearchPage
	err := s.db.snapshot(ctx, func(qr querier) error {
		cand, err := s.textCandidates(ctx, qr, d, f)
		if err != nil {
			return err
		}
		q := &searchQuery{d: d, cand: cand}
		dir, cmp := "DESC", "<"
		if f.OldestFirst {
			dir, cmp = "ASC", ">"
		}
		var cursor string
		if f.After != nil {
			cursor = " AND (created_at, id) " + cmp + " (" + q.arg(f.After.CreatedAt) + ", " + q.arg(f.After.ID) + ")"
		}
		limit := q.arg(f.Limit + 1)
		var parts []string
		for i, b := range q.branches(f) {
			archived := "0"
			if b.table == d.archive {
				archived = "1"
			}
			parts = append(parts, fmt.Sprintf("SELECT * FROM (SELECT %s, %s AS archived FROM %s WHERE %s%s ORDER BY created_at %s, id %s LIMIT %s) b%d",
				dlqColumns, archived, b.table, b.where, cursor, dir, dir, limit, i))
		}
		sql := "SELECT * FROM (" + strings.Join(parts, " UNION ALL ") + ") m ORDER BY created_at " + dir + ", id " + dir + " LIMIT " + limit
		msgs, err := queryAll(ctx, qr, scanSearchRow, sql, q.args...)
		if err != nil {
			return fmt.Errorf("search dead letters: %w", err)
		}
		if len(msgs) > f.Limit {
			msgs = msgs[:f.Limit]
			last := msgs[len(msgs)-1]
			page.Next = &dlq.SearchCursor{CreatedAt: last.CreatedAt, ID: last.ID}
		}
		page.Messages = msgs
		page.Total, page.TotalIsEstimate, err = s.searchTotal(ctx, qr, d, f, cand)
		return err
	})
	return page, err
}

// scanSearchRow reads a message and whether it came from the archive.
func scanSearchRow(row scanner) (dlq.Message, error) {
	var archived int
	m, err := scanMessage(extraScanner{row, []any{&archived}})
	m.Archived = archived == 1
	return m, err
}

// extraScanner scans the columns of scanMessage, then extra ones.
type extraScanner struct {
	scanner
	extra []any
}

func (e extraScanner) Scan(dest ...any) error { return e.scanner.Scan(append(dest, e.extra...)...) }

// searchTotal counts the matches exactly when the counters answer (a
// filter on topic, status and group alone, live messages only) or when
// there are at most TotalThreshold; above that PostgreSQL gives its
// planner's estimate (at least TotalThreshold+1) and SQLite counts them all.
func (s *sqlStore) searchTotal(ctx context.Context, qr querier, d *searchDialect, f dlq.SearchFilter, cand candidates) (int64, bool, error) {
	if n, ok, err := s.countersTotal(ctx, qr, d, f); err != nil || ok {
		return n, false, err
	}
	q := &searchQuery{d: d, cand: cand}
	if cand == nil {
		q.source = q.broadSource(f)
	}
	var parts []string
	for i, b := range q.branches(f) {
		parts = append(parts, fmt.Sprintf("SELECT * FROM (SELECT 1 AS one FROM %s WHERE %s%s) c%d", b.table, b.where, "%s", i))
	}
	union := strings.Join(parts, " UNION ALL ")
	if !d.postgres {
		var n int64
		err := qr.queryRow(ctx, "SELECT count(*) FROM ("+strings.ReplaceAll(union, "%s", "")+") t", q.args...).Scan(&n)
		return n, false, err
	}
	capped := strings.ReplaceAll(union, "%s", " LIMIT "+strconv.Itoa(TotalThreshold+1))
	var n int64
	if err := qr.queryRow(ctx, "SELECT count(*) FROM ("+capped+") t", q.args...).Scan(&n); err != nil {
		return 0, false, fmt.Errorf("count dead letters: %w", err)
	}
	if n <= TotalThreshold {
		return n, false, nil
	}
	var plan []byte
	if err := qr.queryRow(ctx, "EXPLAIN (FORMAT JSON) SELECT 1 FROM ("+strings.ReplaceAll(union, "%s", "")+") t", q.args...).Scan(&plan); err != nil {
		return 0, false, fmt.Errorf("estimate dead letters: %w", err)
	}
	var explained []struct {
		Plan struct {
			Rows float64 `json:"Plan Rows"`
		} `json:"Plan"`
	}
	if err := json.Unmarshal(plan, &explained); err != nil || len(explained) == 0 {
		return 0, false, fmt.Errorf("estimate dead letters: unreadable plan: %v", err)
	}
	return max(int64(explained[0].Plan.Rows), TotalThreshold+1), true, nil
}

// countersTotal answers the total from the per-topic or per-group counters
// when the filter is only a topic, statuses and a group, on live messages.
func (s *sqlStore) countersTotal(ctx context.Context, qr querier, d *searchDialect, f dlq.SearchFilter) (int64, bool, error) {
	if f.IncludeArchived || f.Error != "" || f.Text != "" || f.Key != nil || len(f.Headers) > 0 || f.Since != nil || f.Until != nil {
		return 0, false, nil
	}
	q := &searchQuery{d: d}
	table, conds := d.topicCounts, []string{}
	if f.Group != "" {
		table = d.groupCounts
		conds = append(conds, "group_id = "+q.arg(f.Group))
	}
	if f.Topic != "" {
		t := q.arg(f.Topic)
		conds = append(conds, "(dlq_topic = "+t+" OR (original_topic = "+t+" AND dlq_topic <> "+t+"))")
	}
	if len(f.Statuses) > 0 {
		var in []string
		for _, st := range f.Statuses {
			in = append(in, q.arg(string(st)))
		}
		conds = append(conds, "status IN ("+strings.Join(in, ", ")+")")
	}
	where := ""
	if len(conds) > 0 {
		where = " WHERE " + strings.Join(conds, " AND ")
	}
	var n int64
	if err := qr.queryRow(ctx, "SELECT COALESCE(sum(n), 0) FROM "+table+where, q.args...).Scan(&n); err != nil {
		return 0, false, fmt.Errorf("count dead letters: %w", err)
	}
	return n, true, nil
}

// SearchDLQ implements dlq.SearchStore.
func (p *Postgres) SearchDLQ(ctx context.Context, f dlq.SearchFilter) (dlq.SearchPage, error) {
	return p.search(ctx, &pgSearch, f)
}

// SearchDLQ implements dlq.SearchStore.
func (s *SQLite) SearchDLQ(ctx context.Context, f dlq.SearchFilter) (dlq.SearchPage, error) {
	return s.search(ctx, &sqliteSearch, f)
}
