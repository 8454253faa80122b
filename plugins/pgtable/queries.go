package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lifecycled/lifecycled/sdk"
)

// queries is the SQL of one config.
type queries struct {
	cfg   config
	fetch string // (table, in-flight ids, limit) -> id, payload, error, class, failed_at, attempts, row as JSON
	take  string // (table, ids)
	// resolveState marks a row whose retry succeeded in the state table:
	// (table, id); resolveRow in the row itself, as the config says: (id).
	resolveState string
	resolveRow   []string
	insert       string // into the retry table: (payload)
	columns      string // a row's columns as JSON: (id)
	create       string
}

func col(name string) string { return "t." + pgx.Identifier{name}.Sanitize() }

func textOrNull(name string) string {
	if name == "" {
		return "NULL::text"
	}
	return col(name) + "::text"
}

func newQueries(c config) *queries {
	state := ident(c.StateTable)
	where := "true"
	if c.Where != "" {
		where = "(" + c.Where + ")"
	}
	attempts := "NULL::int"
	if c.AttemptsColumn != "" {
		attempts = col(c.AttemptsColumn) + "::int"
	}
	q := &queries{cfg: c}
	q.fetch = fmt.Sprintf(`
		SELECT %s::text, %s::text, %s, %s, %s::timestamptz, %s, (to_jsonb(t) - %s)::text
		FROM %s t
		WHERE %s AND NOT EXISTS (SELECT 1 FROM %s s WHERE s.source_table = $1 AND s.row_id = %s::text)
			AND NOT (%s::text = ANY($2))
		ORDER BY %s, %s LIMIT $3`,
		col(c.IDColumn), col(c.PayloadColumn), textOrNull(c.ErrorColumn), textOrNull(c.ClassColumn), col(c.FailedAtColumn),
		attempts, quoteLiteral(c.PayloadColumn), ident(c.Table), where, state, col(c.IDColumn), col(c.IDColumn),
		col(c.FailedAtColumn), col(c.IDColumn))
	q.take = fmt.Sprintf(`INSERT INTO %s (source_table, row_id) SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING`, state)
	q.resolveState = fmt.Sprintf(`UPDATE %s SET resolved_at = now() WHERE source_table = $1 AND row_id = $2`, state)
	if c.ResolvedColumn != "" {
		q.resolveRow = append(q.resolveRow, fmt.Sprintf(`UPDATE %s t SET %s = now() WHERE %s::text = $1`,
			ident(c.Table), pgx.Identifier{c.ResolvedColumn}.Sanitize(), col(c.IDColumn)))
	}
	if c.OnResolved == "delete" {
		q.resolveRow = append(q.resolveRow, fmt.Sprintf(`DELETE FROM %s t WHERE %s::text = $1`, ident(c.Table), col(c.IDColumn)))
	}
	q.columns = fmt.Sprintf(`SELECT to_jsonb(t)::text FROM %s t WHERE %s::text = $1`, ident(c.Table), col(c.IDColumn))
	if c.RetryTable != "" {
		q.insert = fmt.Sprintf(`INSERT INTO %s (%s) VALUES ($1)`, ident(c.RetryTable), pgx.Identifier{c.RetryPayloadColumn}.Sanitize())
	}
	q.create = fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
		source_table TEXT NOT NULL, row_id TEXT NOT NULL, taken_at TIMESTAMPTZ NOT NULL DEFAULT now(),
		resolved_at TIMESTAMPTZ, PRIMARY KEY (source_table, row_id))`, state)
	return q
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// check reads the table the way Fetch does, without rows, so that a
// missing table or column, a where that does not compile or a retry
// table that cannot take the payload is a config error now.
func (q *queries) check(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, q.create); err != nil {
		return classify("state_table", err)
	}
	rows, err := pool.Query(ctx, q.fetch, q.cfg.Table, []string{}, 0)
	if err == nil {
		rows.Close()
		err = rows.Err()
	}
	if err != nil {
		return classify("table", err)
	}
	for _, m := range placeholder.FindAllStringSubmatch(q.cfg.RetryURL, -1) {
		rows, err := pool.Query(ctx, fmt.Sprintf(`SELECT %s FROM %s t LIMIT 0`, col(m[1]), ident(q.cfg.Table)))
		if err == nil {
			rows.Close()
			err = rows.Err()
		}
		if err != nil {
			return classify("retry_url", err)
		}
	}
	if q.insert != "" {
		rows, err := pool.Query(ctx, fmt.Sprintf(`SELECT %s FROM %s LIMIT 0`, pgx.Identifier{q.cfg.RetryPayloadColumn}.Sanitize(), ident(q.cfg.RetryTable)))
		if err == nil {
			rows.Close()
			err = rows.Err()
		}
		if err != nil {
			return classify("retry_table", err)
		}
	}
	return nil
}

// classify: what the config names and does not exist is a config error;
// a server that cannot be reached is retryable.
func classify(field string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code[:2] {
		case "42": // syntax error or access rule violation: undefined table, column, bad where
			return sdk.InvalidConfig(sdk.FieldError{Field: field, Problem: pe.Message})
		case "28": // invalid authorization
			return sdk.Permanent(fmt.Errorf("dsn: %s", pe.Message))
		}
	}
	return sdk.Retryable(fmt.Errorf("%s: %w", field, err), time.Second)
}

// row is one failed job as Fetch reads it.
type row struct {
	id, payload    string
	errText, class *string
	failedAt       time.Time
	attempts       *int
	columns        map[string]any
	payloadNull    bool
}

func (q *queries) rows(ctx context.Context, pool *pgxpool.Pool, inFlight []string, limit int) ([]row, error) {
	rs, err := pool.Query(ctx, q.fetch, q.cfg.Table, inFlight, limit)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []row
	for rs.Next() {
		var (
			r        row
			payload  *string
			failedAt *time.Time
			columns  string
		)
		if err := rs.Scan(&r.id, &payload, &r.errText, &r.class, &failedAt, &r.attempts, &columns); err != nil {
			return nil, err
		}
		// Numbers as written: a bigint column is not a float.
		dec := json.NewDecoder(strings.NewReader(columns))
		dec.UseNumber()
		if err := dec.Decode(&r.columns); err != nil {
			return nil, fmt.Errorf("read row %s: %w", r.id, err)
		}
		if payload != nil {
			r.payload = *payload
		} else {
			r.payloadNull = true
		}
		if failedAt != nil {
			r.failedAt = *failedAt
		}
		out = append(out, r)
	}
	return out, rs.Err()
}

// rowColumns reads a row's columns again, by id.
func (q *queries) rowColumns(ctx context.Context, pool *pgxpool.Pool, id string) (map[string]any, error) {
	var text string
	if err := pool.QueryRow(ctx, q.columns, id).Scan(&text); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var out map[string]any
	return out, dec.Decode(&out)
}

// headers are a row's columns but its payload, by name: text as it is,
// other JSON values as JSON, null as a null value.
func (r row) headers() []sdk.Header {
	keys := make([]string, 0, len(r.columns))
	for k := range r.columns {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]sdk.Header, 0, len(keys))
	for _, k := range keys {
		out = append(out, sdk.Header{Key: []byte(k), Value: columnText(r.columns[k])})
	}
	return out
}

func columnText(v any) []byte {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return []byte(x)
	}
	b, _ := json.Marshal(v)
	return b
}
