package sqlstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// Search across topics (GET /api/v1/dlq/messages). A search is split into
// branches, one per (table, topic column, status): each has equality on the
// leading columns of one index (dlq_topic|original_topic|failure_group|
// status, then created_at, id), so it is an ordered index walk from the
// cursor that stops after limit+1 rows, and the branches are merged. A
// topic matches the DLQ topic or the original topic, like every other
// route; a message whose original topic is its DLQ topic is found once.

// SearchDialect is what differs between the dialects' search SQL.
type SearchDialect struct {
	Live, Archive       string
	Groups, GroupCounts string
	TopicCounts         string
	// Arrivals are the live messages taken in per UTC hour, DLQ topic
	// and failure group (migration 026).
	Arrivals              string
	Placeholder           func(n int) string
	ErrorMatch, TextMatch func(d *SearchQuery, table, substr string) string
	HeaderMatch           func(d *SearchQuery, h dlq.HeaderFilter) string
	// The text index (dlq_search_index.go): the indexed messages whose
	// text may match, false when the index cannot look the text up; the
	// messages not indexed yet; the condition that a message is one of ids.
	Indexed   func(q *SearchQuery, field TextField, substr string) (string, bool)
	Unindexed string
	IDs       func(q *SearchQuery, ids Candidates) string
	// Pending is the queue of messages the indexer has yet to index.
	Pending string
	// IdCast follows an id parameter that a statement selects as a column
	// ("::uuid" where a parameter has no type of its own).
	IdCast string
	// CountsCandidates is whether a count reads a broad text filter's
	// candidates as its row source (see broadSource): a total that stops
	// counting at TotalThreshold then stops reading candidates there.
	CountsCandidates bool
	// Total counts the rows of union, a UNION ALL of branches each with a
	// %s where a LIMIT may go, past the counters (see searchTotal).
	Total func(ctx context.Context, qr Querier, union string, args []any) (int64, bool, error)
}

// TotalThreshold is how many matches a search counts exactly; above it the
// total is an estimate (PostgreSQL's planner) and marked as one.
const TotalThreshold = 10000

// LikeEscape makes s match itself in a LIKE pattern whose escape is \.
func LikeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// SearchQuery builds one statement and its arguments.
type SearchQuery struct {
	d    *SearchDialect
	args []any
	// cand, when not nil, are the only live messages that can match (the
	// text index's candidates); else source, when set, selects them.
	cand   Candidates
	source string
}

func (q *SearchQuery) Arg(v any) string {
	q.args = append(q.args, v)
	return q.d.Placeholder(len(q.args))
}

// branchConds are the WHERE conditions of every branch of f on table but
// the leading index columns and the cursor.
func (q *SearchQuery) commonConds(f dlq.SearchFilter, table string) []string {
	var c []string
	if f.Group != "" {
		c = append(c, "failure_group = "+q.Arg(f.Group))
	}
	if f.ErrorGroup != "" {
		c = append(c, "failure_group IN (SELECT id FROM "+q.d.Groups+" WHERE error_group = "+q.Arg(f.ErrorGroup)+")")
	}
	if f.Key != nil {
		c = append(c, "message_key = "+q.Arg([]byte(*f.Key)))
	}
	if f.Since != nil {
		c = append(c, "created_at >= "+q.Arg(*f.Since))
	}
	if f.Until != nil {
		c = append(c, "created_at < "+q.Arg(*f.Until))
	}
	if f.Error != "" {
		c = append(c, q.d.ErrorMatch(q, table, f.Error))
	}
	if f.Text != "" {
		c = append(c, q.d.TextMatch(q, table, f.Text))
	}
	for _, h := range f.Headers {
		c = append(c, q.d.HeaderMatch(q, h))
	}
	return c
}

// branches returns the WHERE clause of every branch: one per table, topic
// column and status.
func (q *SearchQuery) branches(f dlq.SearchFilter) []struct{ table, where string } {
	tables := []string{q.d.Live}
	if f.IncludeArchived {
		tables = append(tables, q.d.Archive)
	}
	statuses := f.Statuses
	if len(statuses) == 0 {
		statuses = dlq.Statuses
	}
	var out []struct{ table, where string }
	for _, table := range tables {
		if table == q.d.Live && q.cand != nil {
			out = append(out, struct{ table, where string }{table, q.candidateBranch(f)})
			continue
		}
		if table == q.d.Live && q.source != "" {
			out = append(out, struct{ table, where string }{q.source, q.candidateBranch(f)})
			continue
		}
		topicConds := []string{""}
		if f.Topic != "" {
			t := q.Arg(f.Topic)
			topicConds = []string{"dlq_topic = " + t, "original_topic = " + t + " AND dlq_topic <> " + t}
		}
		common := q.commonConds(f, table)
		for _, tc := range topicConds {
			for _, st := range statuses {
				conds := []string{"status = " + q.Arg(string(st))}
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
func (q *SearchQuery) candidateBranch(f dlq.SearchFilter) string {
	var conds []string
	if q.cand != nil {
		conds = append(conds, q.d.IDs(q, q.cand))
	}
	if f.Topic != "" {
		t := q.Arg(f.Topic)
		conds = append(conds, "(dlq_topic = "+t+" OR original_topic = "+t+")")
	}
	if len(f.Statuses) > 0 {
		in := make([]string, len(f.Statuses))
		for i, st := range f.Statuses {
			in[i] = q.Arg(string(st))
		}
		conds = append(conds, "status IN ("+strings.Join(in, ", ")+")")
	}
	return strings.Join(append(conds, q.commonConds(f, q.d.Live)...), " AND ")
}

// search runs a search in one snapshot: the page and its total agree.
func (s *Store) search(ctx context.Context, d *SearchDialect, f dlq.SearchFilter) (dlq.SearchPage, error) {
	var page dlq.SearchPage
	err := s.conn.Snapshot(ctx, func(qr Querier) error {
		cand, err := s.textCandidates(ctx, qr, d, f)
		if err != nil {
			return err
		}
		q := &SearchQuery{d: d, cand: cand}
		dir, cmp := "DESC", "<"
		if f.OldestFirst {
			dir, cmp = "ASC", ">"
		}
		var cursor string
		if f.After != nil {
			cursor = " AND (created_at, id) " + cmp + " (" + q.Arg(f.After.CreatedAt) + ", " + q.Arg(f.After.ID) + ")"
		}
		limit := q.Arg(f.Limit + 1)
		var parts []string
		for i, b := range q.branches(f) {
			archived := "0"
			if b.table == d.Archive {
				archived = "1"
			}
			parts = append(parts, fmt.Sprintf("SELECT * FROM (SELECT %s, %s AS archived FROM %s WHERE %s%s ORDER BY created_at %s, id %s LIMIT %s) b%d",
				DLQColumns, archived, b.table, b.where, cursor, dir, dir, limit, i))
		}
		sql := "SELECT * FROM (" + strings.Join(parts, " UNION ALL ") + ") m ORDER BY created_at " + dir + ", id " + dir + " LIMIT " + limit
		msgs, err := QueryAll(ctx, qr, scanSearchRow, sql, q.args...)
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
func scanSearchRow(row Scanner) (dlq.Message, error) {
	var archived int
	m, err := ScanMessage(ExtraScanner{row, []any{&archived}})
	m.Archived = archived == 1
	return m, err
}

// ExtraScanner scans the columns of ScanMessage, then extra ones.
type ExtraScanner struct {
	Scanner
	Extra []any
}

func (e ExtraScanner) Scan(dest ...any) error { return e.Scanner.Scan(append(dest, e.Extra...)...) }

// searchTotal counts the matches exactly when the counters answer (a
// filter on topic, status and group alone, live messages only) or when
// there are at most TotalThreshold; above that PostgreSQL gives its
// planner's estimate (at least TotalThreshold+1) and SQLite counts them all
// (the dialect's total).
func (s *Store) searchTotal(ctx context.Context, qr Querier, d *SearchDialect, f dlq.SearchFilter, cand Candidates) (int64, bool, error) {
	if n, ok, err := s.countersTotal(ctx, qr, d, f); err != nil || ok {
		return n, false, err
	}
	q := &SearchQuery{d: d, cand: cand}
	if cand == nil {
		q.source = q.broadSource(f)
	}
	var parts []string
	for i, b := range q.branches(f) {
		parts = append(parts, fmt.Sprintf("SELECT * FROM (SELECT 1 AS one FROM %s WHERE %s%s) c%d", b.table, b.where, "%s", i))
	}
	return d.Total(ctx, qr, strings.Join(parts, " UNION ALL "), q.args)
}

// countersTotal answers the total from the per-topic or per-group counters
// when the filter is only a topic, statuses and a group, on live messages.
func (s *Store) countersTotal(ctx context.Context, qr Querier, d *SearchDialect, f dlq.SearchFilter) (int64, bool, error) {
	if f.IncludeArchived || f.Error != "" || f.Text != "" || f.Key != nil || len(f.Headers) > 0 || f.Since != nil || f.Until != nil {
		return 0, false, nil
	}
	q := &SearchQuery{d: d}
	table, conds := d.TopicCounts, []string{}
	if f.Group != "" {
		table = d.GroupCounts
		conds = append(conds, "group_id = "+q.Arg(f.Group))
	}
	if f.ErrorGroup != "" {
		table = d.GroupCounts
		conds = append(conds, "group_id IN (SELECT id FROM "+d.Groups+" WHERE error_group = "+q.Arg(f.ErrorGroup)+")")
	}
	if f.Topic != "" {
		t := q.Arg(f.Topic)
		conds = append(conds, "(dlq_topic = "+t+" OR (original_topic = "+t+" AND dlq_topic <> "+t+"))")
	}
	if len(f.Statuses) > 0 {
		var in []string
		for _, st := range f.Statuses {
			in = append(in, q.Arg(string(st)))
		}
		conds = append(conds, "status IN ("+strings.Join(in, ", ")+")")
	}
	where := ""
	if len(conds) > 0 {
		where = " WHERE " + strings.Join(conds, " AND ")
	}
	var n int64
	if err := qr.QueryRow(ctx, "SELECT COALESCE(sum(n), 0) FROM "+table+where, q.args...).Scan(&n); err != nil {
		return 0, false, fmt.Errorf("count dead letters: %w", err)
	}
	return n, true, nil
}

// SearchDLQ implements dlq.SearchStore.
func (s *Store) SearchDLQ(ctx context.Context, f dlq.SearchFilter) (dlq.SearchPage, error) {
	return s.search(ctx, s.sql.Search, f)
}
