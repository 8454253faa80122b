package erasurefuzz

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
)

// snapshot is every row of every generated table, as text, and whose.
type snapshot struct {
	rows map[string][]string // table name -> row texts, sorted
	// owned counts rows per table and owner.
	owned map[string]map[Owner]int
	// history counts, per system-versioned table, the erased tenant's rows
	// in its history (FOR SYSTEM_TIME ALL).
	history map[string]int
	// written is how many audit rows triggers wrote so far.
	written int64
}

// take reads every row of the schema's tables.
func (s *Schema) take(ctx context.Context, db *sql.DB) (*snapshot, error) {
	snap := &snapshot{rows: map[string][]string{}, owned: map[string]map[Owner]int{}, history: map[string]int{}}
	tables := append([]*Table(nil), s.Tables...)
	if s.Audit != nil {
		tables = append(tables, s.Audit)
	}
	for _, t := range tables {
		name := s.qualName(t)
		rows, err := db.QueryContext(ctx, "SELECT * FROM "+s.qual(t))
		if err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", name, err)
		}
		cols, err := rows.Columns()
		if err != nil {
			rows.Close()
			return nil, err
		}
		ownerAt := -1
		for i, c := range cols {
			if c == "fz_owner" {
				ownerAt = i
			}
		}
		snap.owned[name] = map[Owner]int{}
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				rows.Close()
				return nil, err
			}
			parts := make([]string, len(vals))
			for i, v := range vals {
				switch x := v.(type) {
				case nil:
					parts[i] = "NULL"
				case []byte:
					parts[i] = fmt.Sprintf("%q", string(x))
				default:
					parts[i] = fmt.Sprintf("%q", fmt.Sprint(x))
				}
			}
			owner := Owner(strings.Trim(parts[ownerAt], `"`))
			snap.owned[name][owner]++
			snap.rows[name] = append(snap.rows[name], string(owner)+" "+strings.Join(parts, " "))
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		sort.Strings(snap.rows[name])
		if t.Versioned {
			var n int
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+s.qual(t)+" FOR SYSTEM_TIME ALL WHERE fz_owner = 'A'").Scan(&n); err != nil {
				return nil, err
			}
			snap.history[name] = n - snap.owned[name][erased] // the history alone
		}
	}
	if s.Audit != nil {
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+s.trail()).Scan(&snap.written); err != nil {
			return nil, err
		}
	}
	return snap, nil
}

// removed is, per table, how many rows of before are not in after
// (multisets of row texts: a changed row counts as removed).
func removed(before, after *snapshot) map[string]int64 {
	out := map[string]int64{}
	for name, rows := range before.rows {
		left := map[string]int{}
		for _, r := range after.rows[name] {
			left[r]++
		}
		for _, r := range rows {
			if left[r] > 0 {
				left[r]--
				continue
			}
			out[name]++
		}
	}
	return out
}

// othersChanged names the rows of any owner but the erased tenant that
// differ between the two snapshots (the audit table gains rows by design:
// only the rows it had are compared).
func (s *Schema) othersChanged(before, after *snapshot) []string {
	var out []string
	for name, rows := range before.rows {
		keep := func(rs []string) map[string]int {
			m := map[string]int{}
			for _, r := range rs {
				if !strings.HasPrefix(r, string(erased)+" ") {
					m[r]++
				}
			}
			return m
		}
		b, a := keep(rows), keep(after.rows[name])
		for r, n := range b {
			if a[r] < n {
				out = append(out, fmt.Sprintf("%s lost %s", name, r))
			}
		}
		if s.Audit != nil && name == s.qualName(s.Audit) {
			continue
		}
		for r, n := range a {
			if b[r] < n {
				out = append(out, fmt.Sprintf("%s gained %s", name, r))
			}
		}
	}
	sort.Strings(out)
	return out
}

// changed names every row that differs between the snapshots.
func changed(before, after *snapshot) []string {
	var out []string
	for name := range before.rows {
		if strings.Join(before.rows[name], "\n") != strings.Join(after.rows[name], "\n") {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// tenantLeft counts the erased tenant's rows in every table the config
// does not keep, history included.
func (s *Schema) tenantLeft(snap *snapshot) map[string]int {
	out := map[string]int{}
	for name, owned := range snap.owned {
		short := strings.TrimPrefix(name, s.Name+".")
		if s.Kept[short] {
			continue
		}
		if n := owned[erased] + snap.history[name]; n > 0 {
			out[name] = n
		}
	}
	return out
}
