package postgres

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"
)

var pgSearch = sqlstore.SearchDialect{
	Live: "dlq.dlq_messages", Archive: "dlq.dlq_messages_archive",
	Groups: "dlq.dlq_failure_groups", GroupCounts: "dlq.dlq_group_counts", TopicCounts: "dlq.dlq_topic_counts", Arrivals: "dlq.dlq_arrivals",
	Placeholder: func(n int) string { return "$" + strconv.Itoa(n) },
	// Checked on each row (the text index narrows the rows to check) with
	// strpos on lower(): what ILIKE does in a UTF-8 database, but the
	// planner takes it for a third of the rows instead of a handful (it has
	// no statistics of the expression), so a broad text walks the ordered
	// index and stops after a page instead of sorting every match.
	ErrorMatch: func(q *sqlstore.SearchQuery, _ string, s string) string {
		if !pgText(s) {
			// A text column holds neither: no error text can hold s (and
			// PostgreSQL refuses s as a text argument).
			return "FALSE"
		}
		return "strpos(lower(error_message), lower(" + q.Arg(s) + "::text)) > 0"
	},
	// The payload's bytes with their ASCII letters lowered, and the query's
	// the same way: lower() on the escape encoding (what the trigram
	// index's expression holds) changes only ASCII letters, and decoding
	// it back compares bytes. Compared in the escape encoding, a match
	// could start inside an escape: "\x00 text" (\000 text) was found in
	// the ASCII text `\000 text` (\\000 text), "7377" in the byte 0xff
	// before "377" (\377377).
	TextMatch: func(q *sqlstore.SearchQuery, _ string, s string) string {
		return "position(decode(lower(" + q.Arg(pgEscapeEncode([]byte(s))) + "::text), 'escape') IN " +
			"decode(lower(encode(raw_payload, 'escape')), 'escape')) > 0"
	},
	// jsonb refuses the \u0000 of a stored header name that holds a NUL,
	// and a search that read such a row failed: such rows (encoding/json
	// wrote them; jsonb can hold none) are matched on their JSON text.
	HeaderMatch: func(q *sqlstore.SearchQuery, h dlq.HeaderFilter) string {
		text := "strpos(convert_from(headers, 'UTF8'), " + q.Arg(storedHeaderText(h)) + ") > 0"
		if strings.ContainsRune(h.Name, 0) {
			return text
		}
		return "CASE WHEN strpos(convert_from(headers, 'UTF8'), '\\u0000') = 0 THEN convert_from(headers, 'UTF8')::jsonb @> " +
			q.Arg(headerContains(h)) + "::jsonb ELSE " + text + " END"
	},
	Indexed: pgIndexed, Unindexed: "SELECT id FROM dlq.dlq_search_pending", IDs: pgIds,
	Pending: "dlq.dlq_search_pending", Total: pgTotal, IdCast: "::uuid", CountsCandidates: true,
}

// pgText reports whether PostgreSQL takes s as text: valid UTF-8 without
// a NUL.
func pgText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

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
	name, stored := sqlstore.StoredName(h.Name)
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
	field, stored := sqlstore.StoredName(h.Name)
	name, _ := json.Marshal(stored) // strings always encode
	start := `{"` + field + `":` + string(name) + `,"value":`
	if h.Value == nil {
		return start
	}
	value, _ := json.Marshal(base64.StdEncoding.EncodeToString([]byte(*h.Value)))
	return start + string(value) + `}`
}

// pgTotal counts a search's matches up to TotalThreshold+1, and past
// that gives the planner's estimate (at least TotalThreshold+1), marked
// as one.
func pgTotal(ctx context.Context, qr sqlstore.Querier, union string, args []any) (int64, bool, error) {
	capped := strings.ReplaceAll(union, "%s", " LIMIT "+strconv.Itoa(sqlstore.TotalThreshold+1))
	var n int64
	if err := qr.QueryRow(ctx, "SELECT count(*) FROM ("+capped+") t", args...).Scan(&n); err != nil {
		return 0, false, fmt.Errorf("count dead letters: %w", err)
	}
	if n <= sqlstore.TotalThreshold {
		return n, false, nil
	}
	var plan []byte
	if err := qr.QueryRow(ctx, "EXPLAIN (FORMAT JSON) SELECT 1 FROM ("+strings.ReplaceAll(union, "%s", "")+") t", args...).Scan(&plan); err != nil {
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
	return max(int64(explained[0].Plan.Rows), sqlstore.TotalThreshold+1), true, nil
}
