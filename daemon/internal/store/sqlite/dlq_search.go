package sqlite

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"
)

var sqliteSearch = sqlstore.SearchDialect{
	Live: "dlq_messages", Archive: "dlq_messages_archive",
	Groups: "dlq_failure_groups", GroupCounts: "dlq_group_counts", TopicCounts: "dlq_topic_counts", Arrivals: "dlq_arrivals",
	Placeholder: func(n int) string { return "?" + strconv.Itoa(n) },
	ErrorMatch: func(q *sqlstore.SearchQuery, _ string, s string) string {
		if !likeSafe(s) {
			// LIKE stops reading its pattern at a NUL: "%x\0y%" would be
			// "%x", every error that ends with x (see likeSafe).
			return "instr(CAST(error_message AS BLOB), CAST(" + q.Arg(s) + " AS BLOB)) > 0"
		}
		return "error_message LIKE " + q.Arg("%"+sqlstore.LikeEscape(s)+"%") + ` ESCAPE '\'`
	},
	TextMatch: func(q *sqlstore.SearchQuery, table, s string) string {
		return sqliteTextMatch(q, table, s)
	},
	HeaderMatch: func(q *sqlstore.SearchQuery, h dlq.HeaderFilter) string {
		field, stored := sqlstore.StoredName(h.Name)
		cond := "json_extract(h.value, '$." + field + "') = " + q.Arg(stored)
		if h.Value != nil {
			cond += " AND json_extract(h.value, '$.value') = " + q.Arg(base64.StdEncoding.EncodeToString([]byte(*h.Value)))
		}
		return "EXISTS (SELECT 1 FROM json_each(headers) h WHERE " + cond + ")"
	},
	Indexed:   sqliteIndexed,
	Unindexed: "SELECT id FROM dlq_search_pending UNION ALL SELECT id FROM dlq_search_docs WHERE scan = 1",
	IDs:       sqliteIds,
	Pending:   "dlq_search_pending",
	Total:     sqliteTotal,
}

// sqliteTextMatch checks a payload's bytes, ASCII letters lowered on both
// sides (SQLite's lower() changes those only and keeps every other byte,
// a NUL included), as PostgreSQL does. LIKE would stop reading its pattern
// at a NUL, stop reading the payload at one, and read bad bytes as
// characters: a lone 0xa9 as U+00A9, an overlong E0 83 A9 as U+00E9, others
// as U+FFFD, which filters holding those characters then matched.
func sqliteTextMatch(q *sqlstore.SearchQuery, _ string, s string) string {
	return "instr(CAST(lower(CAST(raw_payload AS TEXT)) AS BLOB), CAST(lower(" + q.Arg(s) + ") AS BLOB)) > 0"
}

// likeSafe reports whether SQLite's LIKE finds s as the bytes it holds:
// LIKE stops reading its pattern at a NUL, and reads a bad byte (of the
// pattern or of the text) as U+FFFD, so that "\xff" and "\ufffd" matched
// every payload holding either.
func likeSafe(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0) && !strings.ContainsRune(s, utf8.RuneError)
}

// sqliteTotal counts all of a search's matches: SQLite has no planner's
// estimate to give.
func sqliteTotal(ctx context.Context, qr sqlstore.Querier, union string, args []any) (int64, bool, error) {
	var n int64
	err := qr.QueryRow(ctx, "SELECT count(*) FROM ("+strings.ReplaceAll(union, "%s", "")+") t", args...).Scan(&n)
	return n, false, err
}
