package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// What the catalogue says beyond tables, columns and keys: the DELETE
// triggers and rules on the tables (which can keep or redirect a delete),
// and each table's identity (the key the proof records rows by).

// readDeleteHooks reads the DELETE triggers (row or statement, enabled or
// not) and DO ALSO/INSTEAD rules of every relation. A trigger a
// partitioned table clones onto its partitions is read once, on the
// parent, so attaching a partition does not add one.
func readDeleteHooks(ctx context.Context, q pgx.Tx, c *catalog) error {
	notClone := ""
	if c.version >= 130000 {
		notClone = "AND t.tgparentid = 0"
	}
	// tgtype: 1 row-level, 2 BEFORE, 8 DELETE. Under session_replication_role
	// origin (which the deleter pins), triggers enabled O (origin) or A
	// (always) fire.
	rows, err := q.Query(ctx, `
		SELECT t.tgrelid::int8, t.tgname::text, false,
			(t.tgtype & 3) = 3 AND t.tgenabled IN ('O', 'A'),
			'trigger ' || quote_ident(t.tgname) || CASE t.tgenabled WHEN 'D' THEN ' (disabled)' ELSE '' END
			|| ': ' || pg_get_triggerdef(t.oid)
		FROM pg_trigger t WHERE NOT t.tgisinternal AND (t.tgtype & 8) <> 0 `+notClone+`
		UNION ALL
		SELECT r.ev_class::int8, r.rulename::text, true, true, 'rule ' || quote_ident(r.rulename) || ': ' || pg_get_ruledef(r.oid)
		FROM pg_rewrite r WHERE r.ev_type = '4'
		ORDER BY 1, 5`)
	if err != nil {
		return classify(fmt.Errorf("read delete triggers and rules: %w", err))
	}
	defer rows.Close()
	for rows.Next() {
		var oid int64
		var h catHook
		if err := rows.Scan(&oid, &h.name, &h.rule, &h.swallows, &h.text); err != nil {
			return classify(err)
		}
		if r := c.rels[uint32(oid)]; r != nil {
			r.hooks = append(r.hooks, h)
		}
	}
	if err := rows.Err(); err != nil {
		return classify(fmt.Errorf("read delete triggers and rules: %w", err))
	}
	return nil
}

// readIdentities reads, for every table, the columns that tell its rows
// apart (catRel.identity): the primary key, else the unique key of NOT
// NULL plain columns with the fewest columns (then by name).
//
// Only the keys of the tables read are read: the system catalogues' unique
// indexes were three quarters of the query's time (4 ms against 1 ms), at
// every catalogue read, several per erasure.
func readIdentities(ctx context.Context, q pgx.Tx, c *catalog) error {
	oids := make([]uint32, 0, len(c.rels))
	for oid := range c.rels {
		oids = append(oids, oid)
	}
	rows, err := q.Query(ctx, `
		SELECT i.indrelid::int8, array_agg(a.attname::text ORDER BY k.ord)
		FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
			CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, ord)
			JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
		WHERE (i.indisprimary OR i.indisunique) AND i.indpred IS NULL AND i.indexprs IS NULL AND i.indisvalid
			AND i.indrelid = ANY($1::text::oid[])
		GROUP BY i.indrelid, i.indexrelid, i.indisprimary, ic.relname
		HAVING bool_and(a.attnotnull)
		ORDER BY i.indrelid, i.indisprimary DESC, count(*), ic.relname`, oidArray(oids))
	if err != nil {
		return classify(fmt.Errorf("read unique keys: %w", err))
	}
	defer rows.Close()
	for rows.Next() {
		var oid int64
		var cols []string
		if err := rows.Scan(&oid, &cols); err != nil {
			return classify(err)
		}
		if r := c.rels[uint32(oid)]; r != nil && r.identity == nil {
			r.identity = cols
		}
	}
	if err := rows.Err(); err != nil {
		return classify(fmt.Errorf("read unique keys: %w", err))
	}
	return nil
}
