package main

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
)

// catalog is what the deleter knows of the server's schemas: every base
// table, the columns that may hold tenant ids, primary keys, which columns
// lead an index, and every foreign key. It is read afresh for every Count
// and Delete, so a key added since Configure is taken into account.
//
// information_schema shows only the tables the deleter's user has a
// privilege on: a key on a table it cannot see is invisible to the
// preflight (docs/plugins.md says what to grant).
type catalog struct {
	tables map[tkey]*catTable
	fks    []*catFK
	// mariadb: the server is MariaDB (statement timeouts differ).
	mariadb bool
	// store names the server and database (storeIdentity), for the fingerprint.
	store string
	// foldTableNames: lower_case_table_names is 1 or 2, so the server
	// compares table and database names without regard to case.
	foldTableNames bool
	// session is what the session settings that change a delete's meaning
	// are, on the deleter's connections and on the server.
	session sessionSettings
}

// storeIdentity names the server and database the deleter is connected
// to, for the plan's fingerprint: an approved plan must not apply to
// another server or database with the same schema (a DSN repointed at a
// staging copy). MySQL has a server UUID; MariaDB has none, so its host
// name, port, data directory and server id stand in for one.
func storeIdentity(ctx context.Context, db *sql.DB, mariadb bool) (string, error) {
	var name sql.NullString
	var server string
	var err error
	if mariadb {
		var host, datadir string
		var port, id int64
		err = db.QueryRowContext(ctx, `SELECT DATABASE(), @@hostname, @@port, @@datadir, @@server_id`).Scan(&name, &host, &port, &datadir, &id)
		server = fmt.Sprintf("mariadb host %q port %d datadir %q server_id %d", host, port, datadir, id)
	} else {
		var uuid string
		err = db.QueryRowContext(ctx, `SELECT DATABASE(), @@server_uuid`).Scan(&name, &uuid)
		server = "server_uuid " + uuid
	}
	if err != nil {
		return "", classify(fmt.Errorf("read the server's identity: %w", err))
	}
	return fmt.Sprintf("%s database %q", server, name.String), nil
}

// tkey is {schema, table}.
type tkey [2]string

func (k tkey) String() string { return k[0] + "." + k[1] }

// catTable is one base table.
type catTable struct {
	key    tkey
	engine string
	// versioned: a MariaDB system-versioned table, which keeps every row a
	// delete removes as history (readable FOR SYSTEM_TIME ALL).
	versioned bool
	// cols are the candidate tenant columns, by lower-case name: MySQL
	// compares column names without regard to case.
	cols         map[string]catColumn
	pk           []string        // primary key columns, in order; nil without one
	indexedFirst map[string]bool // an index leads with the column
	// deleteTriggers are the table's DELETE triggers, each with its
	// statement: code every delete of its rows runs.
	deleteTriggers []string
	// beforeTriggers are the names of its BEFORE DELETE triggers, which
	// run before each row goes and may write it elsewhere.
	beforeTriggers []string
	// identity are the columns that tell its rows apart: the primary key,
	// else a unique key of NOT NULL columns; nil when there is none.
	identity []string
	// columns are all its columns in order (for a whole-row identity).
	columns []string
	// nullable and notNull hold its columns by lower-case name, as the
	// columns' read found them: one in neither was not read.
	nullable, notNull map[string]bool
}

// col returns the candidate tenant column named name, in any case.
func (t *catTable) col(name string) (catColumn, bool) {
	c, ok := t.cols[strings.ToLower(name)]
	return c, ok
}

func (t *catTable) name() string  { return t.key.String() }
func (t *catTable) ident() string { return quoteIdent(t.key[0]) + "." + quoteIdent(t.key[1]) }

// catColumn is a candidate tenant column.
type catColumn struct {
	name       string
	dataType   string // information_schema DATA_TYPE, lower case: varchar, int, ...
	columnType string // COLUMN_TYPE: varchar(36), int(10) unsigned, ...
	maxChars   int64  // CHARACTER_MAXIMUM_LENGTH (0 when none)
	charset    string // CHARACTER_SET_NAME ("" for numbers and binary strings)
	collation  string // COLLATION_NAME
}

// catFK is one foreign key.
type catFK struct {
	name          string
	child, parent tkey
	fkCols        []string
	refCols       []string
	action        byte // c cascade, n set null, d set default, r restrict, a no action
	nullable      bool // every referencing column allows NULL
	// nullCols are the referencing columns that allow NULL.
	nullCols map[string]bool
}

func (f *catFK) describe() string {
	return fmt.Sprintf("%s on %s (%s) references %s", f.name, f.child, strings.Join(f.fkCols, ", "), f.parent)
}

var systemSchemas = `('mysql', 'information_schema', 'performance_schema', 'sys')`

func loadCatalog(ctx context.Context, db *sql.DB, tenantColumns []string) (*catalog, error) {
	c := &catalog{tables: map[tkey]*catTable{}}
	var version string
	if err := db.QueryRowContext(ctx, `SELECT VERSION()`).Scan(&version); err != nil {
		return nil, classify(fmt.Errorf("read server version: %w", err))
	}
	c.mariadb = strings.Contains(strings.ToLower(version), "mariadb")
	store, err := storeIdentity(ctx, db, c.mariadb)
	if err != nil {
		return nil, err
	}
	c.store = store

	var lctn int
	if err := db.QueryRowContext(ctx, `SELECT @@lower_case_table_names`).Scan(&lctn); err != nil {
		return nil, classify(fmt.Errorf("read lower_case_table_names: %w", err))
	}
	c.foldTableNames = lctn != 0
	if c.session, err = readSession(ctx, db, c.mariadb); err != nil {
		return nil, err
	}

	// MariaDB lists a system-versioned table as SYSTEM VERSIONED, not
	// BASE TABLE: it holds rows all the same.
	rows, err := db.QueryContext(ctx, `SELECT TABLE_SCHEMA, TABLE_NAME, COALESCE(ENGINE, ''), TABLE_TYPE = 'SYSTEM VERSIONED' FROM information_schema.TABLES
		WHERE TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED') AND TABLE_SCHEMA NOT IN `+systemSchemas)
	if err != nil {
		return nil, classify(fmt.Errorf("read tables: %w", err))
	}
	for rows.Next() {
		t := &catTable{cols: map[string]catColumn{}, indexedFirst: map[string]bool{}, nullable: map[string]bool{}, notNull: map[string]bool{}}
		if err := rows.Scan(&t.key[0], &t.key[1], &t.engine, &t.versioned); err != nil {
			rows.Close()
			return nil, classify(err)
		}
		c.tables[t.key] = t
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, classify(fmt.Errorf("read tables: %w", err))
	}

	wanted := map[string]bool{}
	for _, n := range tenantColumns {
		wanted[strings.ToLower(n)] = true
	}
	{
		// Every column, in order: the candidates (by lower-case name, as
		// the server compares column names), and the list a whole-row
		// identity is made of.
		q := `SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, LOWER(DATA_TYPE), COLUMN_TYPE,
				COALESCE(CHARACTER_MAXIMUM_LENGTH, 0), COALESCE(CHARACTER_SET_NAME, ''), COALESCE(COLLATION_NAME, ''), IS_NULLABLE = 'YES'
			FROM information_schema.COLUMNS WHERE TABLE_SCHEMA NOT IN ` + systemSchemas + `
			ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION`
		rows, err = db.QueryContext(ctx, q)
		if err != nil {
			return nil, classify(fmt.Errorf("read columns: %w", err))
		}
		for rows.Next() {
			var k tkey
			var col catColumn
			var nullable bool
			if err := rows.Scan(&k[0], &k[1], &col.name, &col.dataType, &col.columnType, &col.maxChars, &col.charset, &col.collation, &nullable); err != nil {
				rows.Close()
				return nil, classify(err)
			}
			t := c.tables[k]
			if t == nil {
				continue
			}
			t.columns = append(t.columns, col.name)
			if nullable {
				t.nullable[strings.ToLower(col.name)] = true
			} else {
				t.notNull[strings.ToLower(col.name)] = true
			}
			if wanted[strings.ToLower(col.name)] {
				t.cols[strings.ToLower(col.name)] = col
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, classify(fmt.Errorf("read columns: %w", err))
		}
	}

	// Each view is read alone and the nullability taken from the columns
	// read above: MariaDB fills a join of two information_schema views by
	// opening every table for each (21 ms against 0.5 ms with three
	// tables on the server), and the catalogue is read at every call.
	rows, err = db.QueryContext(ctx, `SELECT TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME, NON_UNIQUE = 0,
			SUB_PART IS NULL
		FROM information_schema.STATISTICS
		WHERE TABLE_SCHEMA NOT IN `+systemSchemas+`
		ORDER BY TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX`)
	if err != nil {
		return nil, classify(fmt.Errorf("read indexes: %w", err))
	}
	// unique keys of NOT NULL whole columns, per table and index name:
	// candidates for the rows' identity when there is no primary key.
	type uniq struct {
		cols []string
		ok   bool
	}
	uniques := map[tkey]map[string]*uniq{}
	for rows.Next() {
		var k tkey
		var index, col string
		var seq int
		var unique, whole bool
		if err := rows.Scan(&k[0], &k[1], &index, &seq, &col, &unique, &whole); err != nil {
			rows.Close()
			return nil, classify(err)
		}
		t := c.tables[k]
		if t == nil {
			continue
		}
		// A column not among those read (altered in between) is not known
		// to be NOT NULL: its key tells no rows apart.
		whole = whole && t.notNull[strings.ToLower(col)]
		if seq == 1 {
			t.indexedFirst[col] = true
		}
		if index == "PRIMARY" {
			t.pk = append(t.pk, col)
		} else if unique {
			if uniques[k] == nil {
				uniques[k] = map[string]*uniq{}
			}
			u := uniques[k][index]
			if u == nil {
				u = &uniq{ok: true}
				uniques[k][index] = u
			}
			u.cols = append(u.cols, col)
			u.ok = u.ok && whole
		}
	}
	for k, t := range c.tables {
		if len(t.pk) > 0 {
			t.identity = t.pk
			continue
		}
		var names []string
		for name, u := range uniques[k] {
			if u.ok {
				names = append(names, name)
			}
		}
		sort.Slice(names, func(i, j int) bool {
			a, b := uniques[k][names[i]], uniques[k][names[j]]
			if len(a.cols) != len(b.cols) {
				return len(a.cols) < len(b.cols)
			}
			return names[i] < names[j]
		})
		if len(names) > 0 {
			t.identity = uniques[k][names[0]].cols
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, classify(fmt.Errorf("read indexes: %w", err))
	}

	// The delete rules, then the keys' columns, each view alone (see the
	// indexes above); a key whose rule is not read (dropped in between) is
	// left out, as the join of the two views left it out.
	rules := map[[3]string]string{}
	rows, err = db.QueryContext(ctx, `SELECT CONSTRAINT_SCHEMA, CONSTRAINT_NAME, TABLE_NAME, DELETE_RULE
		FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA NOT IN `+systemSchemas)
	if err != nil {
		return nil, classify(fmt.Errorf("read foreign keys: %w", err))
	}
	for rows.Next() {
		var k [3]string
		var rule string
		if err := rows.Scan(&k[0], &k[1], &k[2], &rule); err != nil {
			rows.Close()
			return nil, classify(err)
		}
		rules[k] = rule
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, classify(fmt.Errorf("read foreign keys: %w", err))
	}
	// A key's constraint is in its table's schema; one in a system schema
	// references no table the deleter reads.
	rows, err = db.QueryContext(ctx, `SELECT CONSTRAINT_SCHEMA, CONSTRAINT_NAME, TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME,
			REFERENCED_TABLE_SCHEMA, REFERENCED_TABLE_NAME, REFERENCED_COLUMN_NAME
		FROM information_schema.KEY_COLUMN_USAGE
		WHERE REFERENCED_TABLE_NAME IS NOT NULL AND TABLE_SCHEMA NOT IN `+systemSchemas+`
		ORDER BY TABLE_SCHEMA, TABLE_NAME, CONSTRAINT_NAME, ORDINAL_POSITION`)
	if err != nil {
		return nil, classify(fmt.Errorf("read foreign keys: %w", err))
	}
	var last *catFK
	for rows.Next() {
		var f catFK
		var constraintSchema, col, refCol string
		if err := rows.Scan(&constraintSchema, &f.name, &f.child[0], &f.child[1], &col, &f.parent[0], &f.parent[1], &refCol); err != nil {
			rows.Close()
			return nil, classify(err)
		}
		rule, ok := rules[[3]string{constraintSchema, f.name, f.child[1]}]
		if !ok {
			continue
		}
		// A column not among those read (its table dropped while the
		// catalogue is read, another schema's as a rule) is taken as not
		// nullable, the cautious reading.
		var nullable sql.NullBool
		if t := c.tables[f.child]; t != nil {
			lc := strings.ToLower(col)
			nullable = sql.NullBool{Bool: t.nullable[lc], Valid: t.nullable[lc] || t.notNull[lc]}
		}
		if last == nil || last.name != f.name || last.child != f.child {
			f.action = map[string]byte{"CASCADE": 'c', "SET NULL": 'n', "SET DEFAULT": 'd', "RESTRICT": 'r'}[rule]
			if f.action == 0 {
				f.action = 'a' // NO ACTION
			}
			f.nullable = true
			f.nullCols = map[string]bool{}
			last = &f
			c.fks = append(c.fks, last)
		}
		last.nullable = last.nullable && nullable.Valid && nullable.Bool
		if nullable.Valid && nullable.Bool {
			last.nullCols[strings.ToLower(col)] = true
		}
		last.fkCols = append(last.fkCols, col)
		last.refCols = append(last.refCols, refCol)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, classify(fmt.Errorf("read foreign keys: %w", err))
	}
	// Keys between tables the user cannot both see are of no use.
	kept := c.fks[:0]
	for _, f := range c.fks {
		if c.tables[f.child] != nil && c.tables[f.parent] != nil {
			kept = append(kept, f)
		}
	}
	c.fks = kept
	if err := readDeleteTriggers(ctx, db, c); err != nil {
		return nil, err
	}
	return c, nil
}

// readDeleteTriggers reads every DELETE trigger of the tables the user
// can see (BEFORE or AFTER), in the order they fire.
func readDeleteTriggers(ctx context.Context, db *sql.DB, c *catalog) error {
	rows, err := db.QueryContext(ctx, `SELECT EVENT_OBJECT_SCHEMA, EVENT_OBJECT_TABLE, TRIGGER_NAME, ACTION_TIMING, ACTION_STATEMENT
		FROM information_schema.TRIGGERS WHERE EVENT_MANIPULATION = 'DELETE' AND EVENT_OBJECT_SCHEMA NOT IN `+systemSchemas+`
		ORDER BY EVENT_OBJECT_SCHEMA, EVENT_OBJECT_TABLE, ACTION_TIMING, ACTION_ORDER`)
	if err != nil {
		return classify(fmt.Errorf("read delete triggers: %w", err))
	}
	defer rows.Close()
	for rows.Next() {
		var k tkey
		var name, timing, stmt string
		if err := rows.Scan(&k[0], &k[1], &name, &timing, &stmt); err != nil {
			return classify(err)
		}
		if t := c.tables[k]; t != nil {
			t.deleteTriggers = append(t.deleteTriggers, fmt.Sprintf("trigger %s %s DELETE: %s", quoteIdent(name), timing, stmt))
			if strings.EqualFold(timing, "BEFORE") {
				t.beforeTriggers = append(t.beforeTriggers, name)
			}
		}
	}
	if err := rows.Err(); err != nil {
		return classify(fmt.Errorf("read delete triggers: %w", err))
	}
	return nil
}

// lookup resolves a configured table name: "schema.table" or "table" (in
// the DSN's database), each part taken literally. A name that can be split
// at more than one dot into an existing schema and table is ambiguous.
func (c *catalog) lookup(name, defaultSchema string) (*catTable, error) {
	var found []*catTable
	for i := 0; i < len(name); i++ {
		if name[i] != '.' {
			continue
		}
		if t := c.table(tkey{name[:i], name[i+1:]}); t != nil {
			found = append(found, t)
		}
	}
	if t := c.table(tkey{defaultSchema, name}); t != nil {
		found = append(found, t)
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("no table %q (in %s, or as schema.table)", name, defaultSchema)
	case 1:
		return found[0], nil
	}
	var names []string
	for _, t := range found {
		names = append(names, fmt.Sprintf("%s in schema %s", t.key[1], t.key[0]))
	}
	return nil, fmt.Errorf("%q is ambiguous: it names %s; rename one of them", name, strings.Join(names, " and "))
}

// table finds a table by its names as the server compares them: exactly,
// or without regard to case under lower_case_table_names 1 or 2.
func (c *catalog) table(k tkey) *catTable {
	if t := c.tables[k]; t != nil || !c.foldTableNames {
		return t
	}
	for key, t := range c.tables {
		if strings.EqualFold(key[0], k[0]) && strings.EqualFold(key[1], k[1]) {
			return t
		}
	}
	return nil
}

// hasSchema reports whether some table of the catalogue is in database s.
func (c *catalog) hasSchema(s string) bool {
	for k := range c.tables {
		if k[0] == s || (c.foldTableNames && strings.EqualFold(k[0], s)) {
			return true
		}
	}
	return false
}

// quoteIdent quotes a MySQL identifier.
func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }
