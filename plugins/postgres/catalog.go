package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// catalog is what the deleter needs to know of the database's schema: every
// user table with its place in a partition or inheritance tree, the columns
// that may hold tenant ids, and every foreign key. It is read afresh for
// every Count and Delete, so a partition attached or a key added since
// Configure is taken into account.
type catalog struct {
	rels    map[uint32]*catRel
	byName  map[[2]string]uint32 // {schema, name} -> oid
	fks     []catFK
	version int // server_version_num
	// bypassRLS: the deleter's role is a superuser or has BYPASSRLS.
	bypassRLS bool
	// matviews are the materialized views: no delete reaches their rows,
	// so the drift gate looks at them (they are not relations to delete).
	matviews []catMatview
	// store names the database (storeIdentity), for the fingerprint.
	store string
}

// catMatview is a materialized view and its column names.
type catMatview struct {
	schema, name string
	cols         map[string]bool
}

func (v catMatview) qualified() string { return v.schema + "." + v.name }

// lookupMatview finds a materialized view by name as lookup finds tables
// ("schema.name", or a bare name in public).
func (c *catalog) lookupMatview(name string) (catMatview, bool) {
	for _, v := range c.matviews {
		if name == v.qualified() || (v.schema == "public" && name == v.name) {
			return v, true
		}
	}
	return catMatview{}, false
}

// catRel is one relation as pg_class knows it.
type catRel struct {
	oid     uint32
	schema  string
	name    string
	kind    byte     // 'r' table, 'p' partitioned table, 'f' foreign table
	parents []uint32 // pg_inherits parents (partition parent or inheritance parents)
	// partition: attached as a partition (not plain inheritance).
	partition bool
	children  []uint32
	cols      map[string]catColumn // only the candidate tenant columns
	// indexedFirst: an index leads with the column, by column name.
	indexedFirst map[string]bool
	// hiddenRows: row-level security may hide rows from the deleter's role
	// (enabled, and the role neither bypasses it nor has the owner's
	// privileges, unforced; a NOINHERIT member of the owner role has not).
	hiddenRows bool
	// hooks are the DELETE triggers and rules declared on the relation
	// itself (not clones of a partitioned parent's): code every delete of
	// its rows runs.
	hooks []catHook
	// identity are the columns that tell its rows apart: the primary key,
	// else a unique key of NOT NULL columns without expressions or a
	// predicate; nil when there is none (the whole row then identifies it).
	identity []string
}

// catHook is a DELETE trigger or rule.
type catHook struct {
	name string
	rule bool // a rule (DO ALSO or DO INSTEAD), else a trigger
	// swallows: it can keep or redirect the rows a delete removes: a rule,
	// or a row-level BEFORE DELETE trigger that fires in an origin session
	// (its RETURN NULL skips the row; it may write the row elsewhere).
	swallows bool
	// text is how the plan shows it: "trigger soft (disabled): CREATE ...".
	text string
}

func (r *catRel) qualified() string { return r.schema + "." + r.name }
func (r *catRel) ident() string     { return pgx.Identifier{r.schema, r.name}.Sanitize() }

// scan is the FROM item that reads exactly the rows a constraint declared
// on this relation covers: a partitioned table covers its partitions, a
// plain table does not cover inheritance children.
func (r *catRel) scan() string {
	if r.kind == 'p' {
		return r.ident()
	}
	return "ONLY " + r.ident()
}

// catColumn is a candidate tenant column.
type catColumn struct {
	name          string
	typ           string // format_type, for messages
	base          string // the base type, through every domain: "pg_catalog.int4", "ext.citext"
	deterministic bool   // its collation compares bytes, not "equivalent" strings
	// equalityVisible: the base type's own = operator is on the deleter's
	// search_path, so "col = $1" compares as the type does (citext in a
	// schema off the path would compare as text); or the type has no = of
	// its own (varchar), and compares as text wherever it is.
	equalityVisible bool
}

// baseTypeOf is a subquery giving the oid of typeExpr's base type, through
// any number of domains.
func baseTypeOf(typeExpr string) string {
	return `WITH RECURSIVE d(oid, typtype, typbasetype, depth) AS (
			SELECT t.oid, t.typtype, t.typbasetype, 0 FROM pg_type t WHERE t.oid = ` + typeExpr + `
			UNION ALL SELECT t.oid, t.typtype, t.typbasetype, d.depth + 1 FROM pg_type t JOIN d ON t.oid = d.typbasetype
				WHERE d.typtype = 'd' AND d.depth < 32)
		SELECT oid FROM d WHERE typtype <> 'd' LIMIT 1`
}

// catFK is one foreign key (clones on partitions of a key declared on the
// partitioned parent are left out: the parent's key stands for them).
type catFK struct {
	name    string
	child   uint32 // conrelid: the referencing relation it is declared on
	parent  uint32 // confrelid
	fkCols  []string
	refCols []string
	// refTypes: for each column pair whose base types differ, the referenced
	// column's base type (format_type with no typmod) that the referencing
	// value is compared as, as the key does (a text column referencing a
	// char(n) key ignores trailing blanks); "" when they agree.
	refTypes   []string
	action     byte     // confdeltype: a no action, r restrict, c cascade, n set null, d set default
	setCols    []string // SET NULL / SET DEFAULT (cols): the columns it changes; nil means fkCols
	deferrable bool
	fkIndexed  bool
	// triggersOff: a trigger that carries out the key (its ON DELETE
	// action, its check) does not fire in an origin session, on the table
	// it is declared on or any partition (ALTER TABLE ... DISABLE TRIGGER
	// ALL, ENABLE REPLICA TRIGGER).
	triggersOff bool
}

// changed is the set of columns an ON DELETE SET NULL/DEFAULT writes.
func (f catFK) changed() []string {
	if len(f.setCols) > 0 {
		return f.setCols
	}
	return f.fkCols
}

// loadCatalog reads the catalogue in one read-only REPEATABLE READ
// transaction, so that every query sees the same schema: a table created
// while it reads is either wholly in it or wholly out, and what the model
// (and its fingerprint) is built from is one state of the database.
func loadCatalog(ctx context.Context, pool *pgxpool.Pool, tenantColumns []string) (*catalog, error) {
	var c *catalog
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		c, err = readCatalog(ctx, tx, tenantColumns)
		if err == nil {
			c.store, err = storeIdentity(ctx, tx, pool.Config().ConnConfig)
		}
		return err
	})
	if err != nil {
		return nil, classify(err)
	}
	return c, nil
}

// storeIdentity names the database the deleter is connected to, for the
// plan's fingerprint: an approved plan must not apply to another database
// with the same schema (a DSN repointed at a staging copy, a restore on
// another server). The cluster's system identifier when the role may read
// it (pg_control_system(), executable by PUBLIC unless revoked), else the
// server's address and port as the server sees them (the DSN's host and
// port over a Unix socket, where the server has none), and the database.
func storeIdentity(ctx context.Context, q pgx.Tx, cc *pgx.ConnConfig) (string, error) {
	var canRead bool
	if err := q.QueryRow(ctx, `SELECT has_function_privilege('pg_catalog.pg_control_system()', 'EXECUTE')`).Scan(&canRead); err != nil {
		return "", fmt.Errorf("read the database's identity: %w", err)
	}
	var db string
	var addr *string
	var port *int32
	if err := q.QueryRow(ctx, `SELECT current_database(), host(inet_server_addr()), inet_server_port()`).Scan(&db, &addr, &port); err != nil {
		return "", fmt.Errorf("read the database's identity: %w", err)
	}
	if canRead {
		var sysid string
		if err := q.QueryRow(ctx, `SELECT system_identifier::text FROM pg_control_system()`).Scan(&sysid); err != nil {
			return "", fmt.Errorf("read the cluster's system identifier: %w", err)
		}
		return fmt.Sprintf("system_identifier %s database %q", sysid, db), nil
	}
	if addr != nil && port != nil {
		return fmt.Sprintf("server %s port %d database %q", *addr, *port, db), nil
	}
	return fmt.Sprintf("socket %q port %d database %q", cc.Host, cc.Port, db), nil
}

// readCatalog is loadCatalog's reading, within its transaction.
func readCatalog(ctx context.Context, pool pgx.Tx, tenantColumns []string) (*catalog, error) {
	c := &catalog{rels: map[uint32]*catRel{}, byName: map[[2]string]uint32{}}
	if err := pool.QueryRow(ctx, `SELECT current_setting('server_version_num')::int,
		(SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user)`).Scan(&c.version, &c.bypassRLS); err != nil {
		return nil, classify(fmt.Errorf("read server version: %w", err))
	}
	rows, err := pool.Query(ctx, `
		SELECT c.oid::int8, n.nspname, c.relname, c.relkind::text, c.relispartition,
			c.relrowsecurity AND (c.relforcerowsecurity OR NOT pg_has_role(current_user, c.relowner, 'USAGE'))
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p', 'f')
			AND n.nspname NOT IN ('pg_catalog', 'information_schema')
			AND n.nspname NOT LIKE 'pg\_toast%' AND n.nspname NOT LIKE 'pg\_temp\_%'`)
	if err != nil {
		return nil, classify(fmt.Errorf("read tables: %w", err))
	}
	for rows.Next() {
		var oid int64
		var kind string
		r := &catRel{cols: map[string]catColumn{}, indexedFirst: map[string]bool{}}
		if err := rows.Scan(&oid, &r.schema, &r.name, &kind, &r.partition, &r.hiddenRows); err != nil {
			rows.Close()
			return nil, classify(err)
		}
		r.oid, r.kind = uint32(oid), kind[0]
		r.hiddenRows = r.hiddenRows && !c.bypassRLS
		c.rels[r.oid] = r
		c.byName[[2]string{r.schema, r.name}] = r.oid
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, classify(fmt.Errorf("read tables: %w", err))
	}

	rows, err = pool.Query(ctx, `
		SELECT n.nspname, c.relname, coalesce(array_agg(a.attname::text) FILTER (WHERE a.attname IS NOT NULL), '{}')
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		WHERE c.relkind = 'm' GROUP BY 1, 2`)
	if err != nil {
		return nil, classify(fmt.Errorf("read materialized views: %w", err))
	}
	for rows.Next() {
		v := catMatview{cols: map[string]bool{}}
		var cols []string
		if err := rows.Scan(&v.schema, &v.name, &cols); err != nil {
			rows.Close()
			return nil, classify(err)
		}
		for _, col := range cols {
			v.cols[col] = true
		}
		c.matviews = append(c.matviews, v)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, classify(fmt.Errorf("read materialized views: %w", err))
	}

	rows, err = pool.Query(ctx, `SELECT inhrelid::int8, inhparent::int8 FROM pg_inherits ORDER BY inhrelid, inhseqno`)
	if err != nil {
		return nil, classify(fmt.Errorf("read inheritance: %w", err))
	}
	for rows.Next() {
		var child, parent int64
		if err := rows.Scan(&child, &parent); err != nil {
			rows.Close()
			return nil, classify(err)
		}
		ch, p := c.rels[uint32(child)], c.rels[uint32(parent)]
		if ch == nil || p == nil {
			continue // an index partition, or outside the user schemas
		}
		ch.parents = append(ch.parents, p.oid)
		p.children = append(p.children, ch.oid)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, classify(fmt.Errorf("read inheritance: %w", err))
	}

	if err := readDeleteHooks(ctx, pool, c); err != nil {
		return nil, err
	}
	if err := readIdentities(ctx, pool, c); err != nil {
		return nil, err
	}

	rows, err = pool.Query(ctx, `
		SELECT a.attrelid::int8, a.attname, format_type(a.atttypid, a.atttypmod),
			bn.nspname || '.' || bt.typname,
			coalesce((SELECT co.collisdeterministic FROM pg_collation co WHERE co.oid = a.attcollation), true),
			EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = a.attrelid AND i.indkey[0] = a.attnum),
			EXISTS (SELECT 1 FROM pg_operator o JOIN pg_namespace onsp ON onsp.oid = o.oprnamespace
				WHERE o.oprname = '=' AND o.oprleft = bt.oid AND o.oprright = bt.oid AND onsp.nspname = ANY(current_schemas(true)))
			-- A type with no = of its own anywhere (varchar) compares through
			-- the type it is binary-coercible to (text = text, in pg_catalog),
			-- which is how the type itself compares: nothing off the path to miss.
			OR NOT EXISTS (SELECT 1 FROM pg_operator o WHERE o.oprname = '=' AND o.oprleft = bt.oid AND o.oprright = bt.oid)
		FROM pg_attribute a
		CROSS JOIN LATERAL (`+baseTypeOf("a.atttypid")+`) base
		JOIN pg_type bt ON bt.oid = base.oid
		JOIN pg_namespace bn ON bn.oid = bt.typnamespace
		WHERE a.attname = ANY($1) AND a.attnum > 0 AND NOT a.attisdropped`, tenantColumns)
	if err != nil {
		return nil, classify(fmt.Errorf("read columns: %w", err))
	}
	for rows.Next() {
		var oid int64
		var col catColumn
		var indexed bool
		if err := rows.Scan(&oid, &col.name, &col.typ, &col.base, &col.deterministic, &indexed, &col.equalityVisible); err != nil {
			rows.Close()
			return nil, classify(err)
		}
		if r := c.rels[uint32(oid)]; r != nil {
			r.cols[col.name] = col
			r.indexedFirst[col.name] = indexed
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, classify(fmt.Errorf("read columns: %w", err))
	}

	// confdelsetcols (ON DELETE SET NULL (cols)) exists from PostgreSQL 15.
	setCols := `NULL::text[]`
	if c.version >= 150000 {
		setCols = `(SELECT array_agg(a.attname ORDER BY k.ord) FROM unnest(c.confdelsetcols) WITH ORDINALITY k(attnum, ord)
			JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum)`
	}
	rows, err = pool.Query(ctx, `
		SELECT c.conname, c.conrelid::int8, c.confrelid::int8, c.confdeltype::text, c.condeferrable,
			(SELECT array_agg(a.attname ORDER BY k.ord) FROM unnest(c.conkey) WITH ORDINALITY k(attnum, ord)
				JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum),
			(SELECT array_agg(a.attname ORDER BY k.ord) FROM unnest(c.confkey) WITH ORDINALITY k(attnum, ord)
				JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.attnum),
			(SELECT array_agg(CASE WHEN fb.oid = rb.oid THEN '' ELSE format_type(rb.oid, -1) END ORDER BY k.ord)
				FROM unnest(c.conkey, c.confkey) WITH ORDINALITY k(fk, ref, ord)
				JOIN pg_attribute fa ON fa.attrelid = c.conrelid AND fa.attnum = k.fk
				JOIN pg_attribute ra ON ra.attrelid = c.confrelid AND ra.attnum = k.ref
				CROSS JOIN LATERAL (`+baseTypeOf("fa.atttypid")+`) fb
				CROSS JOIN LATERAL (`+baseTypeOf("ra.atttypid")+`) rb),
			`+setCols+`,
			EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.conrelid
				AND (i.indkey::int2[])[0:cardinality(c.conkey) - 1] @> c.conkey::int2[]),
			EXISTS (WITH RECURSIVE tree(oid, depth) AS (SELECT c.oid, 0
					UNION ALL SELECT k.oid, tree.depth + 1 FROM pg_constraint k JOIN tree ON k.conparentid = tree.oid WHERE tree.depth < 64)
				SELECT 1 FROM pg_trigger t JOIN tree ON t.tgconstraint = tree.oid WHERE t.tgenabled NOT IN ('O', 'A'))
		FROM pg_constraint c
		WHERE c.contype = 'f' AND c.conparentid = 0
		ORDER BY c.conname, c.conrelid`)
	if err != nil {
		return nil, classify(fmt.Errorf("read foreign keys: %w", err))
	}
	for rows.Next() {
		var f catFK
		var child, parent int64
		var action string
		if err := rows.Scan(&f.name, &child, &parent, &action, &f.deferrable, &f.fkCols, &f.refCols, &f.refTypes, &f.setCols, &f.fkIndexed, &f.triggersOff); err != nil {
			rows.Close()
			return nil, classify(err)
		}
		f.child, f.parent, f.action = uint32(child), uint32(parent), action[0]
		if c.rels[f.child] == nil || c.rels[f.parent] == nil {
			continue
		}
		c.fks = append(c.fks, f)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, classify(fmt.Errorf("read foreign keys: %w", err))
	}
	return c, nil
}

// root returns the top of oid's partition or inheritance tree.
func (c *catalog) root(oid uint32) uint32 {
	for seen := 0; seen < 64; seen++ {
		r := c.rels[oid]
		if r == nil || len(r.parents) == 0 {
			return oid
		}
		oid = r.parents[0]
	}
	return oid
}

// tree returns oid and every relation below it.
func (c *catalog) tree(oid uint32) []uint32 {
	out := []uint32{oid}
	for i := 0; i < len(out); i++ {
		out = append(out, c.rels[out[i]].children...)
	}
	return out
}

// covered returns the relations a constraint declared on oid applies to:
// a partitioned table's whole tree, or the plain table alone.
func (c *catalog) covered(oid uint32) []uint32 {
	if c.rels[oid].kind == 'p' {
		return c.tree(oid)
	}
	return []uint32{oid}
}

// lookup resolves a configured table name: "schema.table" or "table" (in
// public), each part taken literally (no quoting, case kept). A name that
// can be split at more than one dot into an existing schema and table is
// ambiguous and refused.
func (c *catalog) lookup(name string) (*catRel, error) {
	var found []*catRel
	for i := 0; i < len(name); i++ {
		if name[i] != '.' {
			continue
		}
		if oid, ok := c.byName[[2]string{name[:i], name[i+1:]}]; ok {
			found = append(found, c.rels[oid])
		}
	}
	if oid, ok := c.byName[[2]string{"public", name}]; ok {
		found = append(found, c.rels[oid])
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("no table %q", name)
	case 1:
		return found[0], nil
	}
	var names []string
	for _, r := range found {
		names = append(names, fmt.Sprintf("%s in schema %s", r.name, r.schema))
	}
	return nil, fmt.Errorf("%q is ambiguous: it names %s; rename one of them", name, strings.Join(names, " and "))
}
