package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lifecycled/lifecycled/sdk"
)

// relation is a table as the catalogue knows it.
type relation struct {
	oid    uint32
	schema string
	name   string
}

func (r relation) qualified() string { return r.schema + "." + r.name }

func (r relation) toTable(column string) table {
	return table{name: r.qualified(), ident: pgx.Identifier{r.schema, r.name}.Sanitize(), column: pgx.Identifier{column}.Sanitize()}
}

// fk is a foreign key from child to parent.
type fk struct {
	child, parent uint32
	name          string
	// soft: ON DELETE CASCADE / SET NULL / SET DEFAULT, so deleting the
	// parent first cannot fail because of this key.
	soft    bool
	indexed bool // an index leads with the referencing columns
	cols    string
}

func loadFKs(ctx context.Context, pool *pgxpool.Pool, oids []uint32) ([]fk, error) {
	rows, err := pool.Query(ctx, `
		SELECT c.conrelid::int8, c.confrelid::int8, c.conname, c.confdeltype IN ('c', 'n', 'd'),
			EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.conrelid
				AND (i.indkey::int2[])[0:cardinality(c.conkey) - 1] @> c.conkey::int2[]),
			(SELECT string_agg(a.attname, ', ') FROM pg_attribute a
				WHERE a.attrelid = c.conrelid AND a.attnum = ANY(c.conkey))
		FROM pg_constraint c
		WHERE c.contype = 'f' AND (c.conrelid = ANY($1) OR c.confrelid = ANY($1))`, oidsParam(oids))
	if err != nil {
		return nil, classify(fmt.Errorf("read foreign keys: %w", err))
	}
	defer rows.Close()
	var out []fk
	for rows.Next() {
		var f fk
		var child, parent int64
		if err := rows.Scan(&child, &parent, &f.name, &f.soft, &f.indexed, &f.cols); err != nil {
			return nil, err
		}
		f.child, f.parent = uint32(child), uint32(parent)
		out = append(out, f)
	}
	return out, rows.Err()
}

func oidsParam(oids []uint32) []int64 {
	out := make([]int64, len(oids))
	for i, o := range oids {
		out[i] = int64(o)
	}
	return out
}

func relationNames(ctx context.Context, pool *pgxpool.Pool, oid uint32) string {
	var s string
	_ = pool.QueryRow(ctx, `SELECT $1::int8::regclass::text`, int64(oid)).Scan(&s)
	return s
}

// hasTenantIndex reports whether an index leads with the tenant column.
func hasTenantIndex(ctx context.Context, pool *pgxpool.Pool, oid uint32, column string) (bool, error) {
	var ok bool
	err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_index i
		JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
		WHERE i.indrelid = $1::int8::oid AND a.attname = $2)`, int64(oid), column).Scan(&ok)
	return ok, err
}

// warningsFor lists the usual causes of slow deletes: no index on the tenant
// column, no index on a foreign key's referencing columns, and references
// from tables the deleter does not clean.
func warningsFor(ctx context.Context, pool *pgxpool.Pool, rels []relation, column string, fks []fk) ([]string, error) {
	in := map[uint32]relation{}
	for _, r := range rels {
		in[r.oid] = r
	}
	var warnings []string
	for _, r := range rels {
		ok, err := hasTenantIndex(ctx, pool, r.oid, column)
		if err != nil {
			return nil, classify(err)
		}
		if !ok {
			warnings = append(warnings, fmt.Sprintf("table %s has no index leading with %s: every delete batch scans the table (CREATE INDEX ON %s (%s))",
				r.qualified(), column, r.qualified(), column))
		}
	}
	for _, f := range fks {
		_, childIn := in[f.child]
		_, parentIn := in[f.parent]
		switch {
		case parentIn && !childIn && !f.soft:
			warnings = append(warnings, fmt.Sprintf("table %s references %s (%s) but is not deleted by this deleter: its rows will block deletes",
				relationNames(ctx, pool, f.child), in[f.parent].qualified(), f.name))
		case parentIn && !f.indexed:
			warnings = append(warnings, fmt.Sprintf("foreign key %s on %s (%s) has no index: deleting from %s checks it with a scan",
				f.name, relationNames(ctx, pool, f.child), f.cols, in[f.parent].qualified()))
		}
		if f.child == f.parent && childIn && !f.soft {
			warnings = append(warnings, fmt.Sprintf("table %s references itself (%s) without ON DELETE CASCADE: a batch may delete a parent row before its children and fail",
				in[f.child].qualified(), f.name))
		}
	}
	return warnings, nil
}

// checkTables resolves configured table names, checks they exist, have the
// tenant column and are listed child first.
func checkTables(ctx context.Context, pool *pgxpool.Pool, names []string, column string) ([]table, []string, error) {
	var problems []sdk.FieldError
	var rels []relation
	pos := map[uint32]int{}
	for i, name := range names {
		var oid *int64
		var schema, rel string
		err := pool.QueryRow(ctx, `SELECT to_regclass($1)::oid::int8, n.nspname, c.relname
			FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass($1)`,
			quoteTable(name)).Scan(&oid, &schema, &rel)
		if err == pgx.ErrNoRows || (err == nil && oid == nil) {
			problems = append(problems, sdk.FieldError{Field: fmt.Sprintf("tables[%d]", i), Problem: fmt.Sprintf("no table %q", name)})
			continue
		}
		if err != nil {
			return nil, nil, classify(fmt.Errorf("look up table %s: %w", name, err))
		}
		var hasCol bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = $1::int8::oid
			AND attname = $2 AND attnum > 0 AND NOT attisdropped)`, *oid, column).Scan(&hasCol); err != nil {
			return nil, nil, classify(err)
		}
		if !hasCol {
			problems = append(problems, sdk.FieldError{Field: fmt.Sprintf("tables[%d]", i), Problem: fmt.Sprintf("table %q has no column %q", name, column)})
			continue
		}
		r := relation{oid: uint32(*oid), schema: schema, name: rel}
		pos[r.oid] = len(rels)
		rels = append(rels, r)
	}
	if len(problems) > 0 {
		return nil, nil, sdk.InvalidConfig(problems...)
	}
	oids := make([]uint32, len(rels))
	for i, r := range rels {
		oids[i] = r.oid
	}
	fks, err := loadFKs(ctx, pool, oids)
	if err != nil {
		return nil, nil, err
	}
	for _, f := range fks {
		ci, childIn := pos[f.child]
		pi, parentIn := pos[f.parent]
		if childIn && parentIn && f.child != f.parent && !f.soft && ci > pi {
			problems = append(problems, sdk.FieldError{Field: "tables", Problem: fmt.Sprintf(
				"%s references %s (%s), so it must be listed before it: list child tables first",
				rels[ci].qualified(), rels[pi].qualified(), f.name)})
		}
	}
	if len(problems) > 0 {
		return nil, nil, sdk.InvalidConfig(problems...)
	}
	warnings, err := warningsFor(ctx, pool, rels, column, fks)
	if err != nil {
		return nil, nil, err
	}
	out := make([]table, len(rels))
	for i, r := range rels {
		out[i] = r.toTable(column)
		out[i].name = names[i]
	}
	return out, warnings, nil
}

// discover finds every table in schemas with the tenant column and orders
// them child first from their foreign keys.
func discover(ctx context.Context, pool *pgxpool.Pool, schemas []string, column string) ([]table, []string, error) {
	rows, err := pool.Query(ctx, `
		SELECT c.oid::int8, n.nspname, c.relname FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition AND n.nspname = ANY($1)
			AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = $2
				AND a.attnum > 0 AND NOT a.attisdropped)
		ORDER BY n.nspname, c.relname`, schemas, column)
	if err != nil {
		return nil, nil, classify(fmt.Errorf("discover tables: %w", err))
	}
	var rels []relation
	for rows.Next() {
		var r relation
		var oid int64
		if err := rows.Scan(&oid, &r.schema, &r.name); err != nil {
			rows.Close()
			return nil, nil, err
		}
		r.oid = uint32(oid)
		rels = append(rels, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	if len(rels) == 0 {
		return nil, nil, sdk.InvalidConfig(sdk.FieldError{Field: "discover", Problem: fmt.Sprintf("no table in schemas %v has a column %q", schemas, column)})
	}
	oids := make([]uint32, len(rels))
	for i, r := range rels {
		oids[i] = r.oid
	}
	fks, err := loadFKs(ctx, pool, oids)
	if err != nil {
		return nil, nil, err
	}
	order, err := orderChildFirst(rels, fks)
	if err != nil {
		return nil, nil, err
	}
	warnings, err := warningsFor(ctx, pool, rels, column, fks)
	if err != nil {
		return nil, nil, err
	}
	out := make([]table, len(order))
	for i, r := range order {
		out[i] = r.toTable(column)
	}
	return out, warnings, nil
}

// orderChildFirst sorts tables so that every referencing table comes before
// the tables it references. Keys with ON DELETE CASCADE/SET NULL order the
// tables when they can but never make a cycle an error; a cycle of plain keys
// is a configuration error naming the tables.
func orderChildFirst(rels []relation, fks []fk) ([]relation, error) {
	byOID := map[uint32]relation{}
	for _, r := range rels {
		byOID[r.oid] = r
	}
	order, cycle := topo(rels, fks, true)
	if cycle == nil {
		return order, nil
	}
	order, cycle = topo(rels, fks, false)
	if cycle == nil {
		return order, nil
	}
	names := make([]string, len(cycle))
	for i, o := range cycle {
		names[i] = byOID[o].qualified()
	}
	return nil, sdk.InvalidConfig(sdk.FieldError{Field: "discover", Problem: fmt.Sprintf(
		"foreign keys form a cycle: %s; list tables explicitly in delete order, or make one of these keys ON DELETE CASCADE or DEFERRABLE",
		strings.Join(names, " -> "))})
}

// topo is a Kahn sort over child->parent edges between the given tables
// (self-references ignored); it returns a cycle when one remains.
func topo(rels []relation, fks []fk, withSoft bool) ([]relation, []uint32) {
	in := map[uint32]bool{}
	for _, r := range rels {
		in[r.oid] = true
	}
	// parents[x] = tables x references; referencedBy[p] = tables referencing p.
	referencedBy := map[uint32]map[uint32]bool{}
	pending := map[uint32]int{} // how many unprocessed children reference each table
	for _, f := range fks {
		if !in[f.child] || !in[f.parent] || f.child == f.parent || (f.soft && !withSoft) {
			continue
		}
		if referencedBy[f.parent] == nil {
			referencedBy[f.parent] = map[uint32]bool{}
		}
		if !referencedBy[f.parent][f.child] {
			referencedBy[f.parent][f.child] = true
			pending[f.parent]++
		}
	}
	byOID := map[uint32]relation{}
	for _, r := range rels {
		byOID[r.oid] = r
	}
	parentsOf := map[uint32][]uint32{}
	for p, children := range referencedBy {
		for c := range children {
			parentsOf[c] = append(parentsOf[c], p)
		}
	}
	var ready []uint32
	for _, r := range rels {
		if pending[r.oid] == 0 {
			ready = append(ready, r.oid)
		}
	}
	var order []relation
	done := map[uint32]bool{}
	for len(ready) > 0 {
		sort.Slice(ready, func(i, j int) bool { return byOID[ready[i]].qualified() < byOID[ready[j]].qualified() })
		o := ready[0]
		ready = ready[1:]
		order = append(order, byOID[o])
		done[o] = true
		for _, p := range parentsOf[o] {
			pending[p]--
			if pending[p] == 0 {
				ready = append(ready, p)
			}
		}
	}
	if len(order) == len(rels) {
		return order, nil
	}
	// Walk from any unfinished table along unfinished children to a repeat.
	var start uint32
	for _, r := range rels {
		if !done[r.oid] {
			start = r.oid
			break
		}
	}
	seen := map[uint32]int{}
	var path []uint32
	cur := start
	for {
		if i, ok := seen[cur]; ok {
			cycle := append(path[i:], cur)
			// path follows "referenced by"; report it as child -> parent.
			for l, r := 0, len(cycle)-1; l < r; l, r = l+1, r-1 {
				cycle[l], cycle[r] = cycle[r], cycle[l]
			}
			return nil, cycle
		}
		seen[cur] = len(path)
		path = append(path, cur)
		var next uint32
		found := false
		for c := range referencedBy[cur] {
			if !done[c] {
				next, found = c, true
				break
			}
		}
		if !found {
			return nil, path
		}
		cur = next
	}
}
