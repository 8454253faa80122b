package store

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

// searchDialect is what differs between the dialects' search SQL.
type searchDialect struct {
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
	// pending is the queue of messages the indexer has yet to index.
	pending string
	// idCast follows an id parameter that a statement selects as a column
	// ("::uuid" where a parameter has no type of its own).
	idCast string
	// countsCandidates is whether a count reads a broad text filter's
	// candidates as its row source (see broadSource): a total that stops
	// counting at TotalThreshold then stops reading candidates there.
	countsCandidates bool
	// total counts the rows of union, a UNION ALL of branches each with a
	// %s where a LIMIT may go, past the counters (see searchTotal).
	total func(ctx context.Context, qr querier, union string, args []any) (int64, bool, error)
}

// TotalThreshold is how many matches a search counts exactly; above it the
// total is an estimate (PostgreSQL's planner) and marked as one.
const TotalThreshold = 10000

// likeEscape makes s match itself in a LIKE pattern whose escape is \.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
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
// planner's estimate (at least TotalThreshold+1) and SQLite counts them all
// (the dialect's total).
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
	return d.total(ctx, qr, strings.Join(parts, " UNION ALL "), q.args)
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
func (s *sqlStore) SearchDLQ(ctx context.Context, f dlq.SearchFilter) (dlq.SearchPage, error) {
	return s.search(ctx, s.sql.search, f)
}
