// Package erasurefuzz generates multi-tenant schemas nobody here designed,
// fills them for three tenants and global rows, erases one tenant through
// a real deleter plugin over gRPC, and checks the erasure invariant against
// the generator's own record of whose each row is:
//
//   - every row of another tenant, every global row and every row nobody
//     owns is unchanged, whatever the outcome;
//   - a refusal before deleting anything changed nothing at all;
//   - a Delete that succeeded counted exactly what went: its total, its
//     breakdown and the rows really removed, table by table, are one number;
//   - the independent proof (Verify) says nothing is left only when the
//     tenant's rows are gone from every table the config does not keep.
//
// The generator covers tables with and without the tenant column (in
// varied case and types), nullable tenant columns with global rows,
// composite, self and cyclic keys with every ON DELETE action, deferrable
// keys and partitions (PostgreSQL), system-versioned tables (MariaDB),
// audit, clean-up and soft-delete triggers, and session settings in the
// DSN. A seed fully determines the schema, the data and the config.
package erasurefuzz

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Dialect is the database a schema is generated for.
type Dialect string

// The dialects.
const (
	Postgres Dialect = "postgres"
	MariaDB  Dialect = "mariadb"
)

// Owner is whose a row is, by the generator's record: a tenant ("A", "B",
// "C"), global ("G": a NULL tenant column), mixed ("X": a row referencing
// two tenants' rows) or nobody's ("N": a row without the tenant column
// whose owning keys are all NULL).
type Owner string

// The tenant erased is always A.
const erased Owner = "A"

// Schema is one generated case.
type Schema struct {
	Seed    uint64
	Dialect Dialect
	// Name is the PostgreSQL schema or the MariaDB database.
	Name    string
	Family  string // tenant id family: "text", "uuid" or "int"
	Tenants map[Owner]string
	Tables  []*Table
	Keys    []*Key
	// Triggers are extra DDL (functions and triggers), in order.
	Triggers []string
	// Audit is the table audit triggers write into, or nil.
	Audit *Table
	// Settings are DSN parameters (PostgreSQL: libpq options; MariaDB:
	// session variables), and Alter are statements run after the data.
	Settings map[string]string
	Alter    []string
	Config   map[string]any
	// Analyzed: PostgreSQL statistics are gathered after the data, so that
	// the planner plans the deleter's statements from each tenant's real
	// share of a table (index or sequential scans) rather than from
	// defaults. Decided from the seed's parity, not drawn: a draw would
	// change every seed's schema.
	Analyzed bool
	// Kept are the tables the config keeps (ignore_tables).
	Kept map[string]bool
	// Notes say which features the seed drew, for the report.
	Notes []string
}

// Table is one generated table.
type Table struct {
	Name string
	// Tenant is the tenant column's spelling, "" without one; TenantType
	// its type, TenantNull whether it allows NULL (global rows).
	Tenant     string
	TenantType string
	TenantNull bool
	// PK: "id", "tenant" ((tenant, id)) or "" (no primary key).
	PK          string
	Partitioned bool // PostgreSQL: PARTITION BY HASH (id)
	Versioned   bool // MariaDB: WITH SYSTEM VERSIONING
	// Cols are the key columns the table's keys added: name -> nullable.
	Cols     map[string]bool
	colOrder []string
	Rows     []*Row
}

// Row is one generated row.
type Row struct {
	ID    int
	Owner Owner
	// Refs are the key column values (nil: NULL), set after insertion for
	// the keys of a cycle.
	Refs map[string]*int
}

// Key is one generated foreign key.
type Key struct {
	Name          string
	Child, Parent *Table
	// Col is the child's column holding the parent's id; Aligned keys
	// also carry the tenant column (composite, onto (tenant, id)).
	Col        string
	Aligned    bool
	Action     string // NO ACTION, RESTRICT, CASCADE, SET NULL, SET DEFAULT
	Deferrable bool
	Nullable   bool
	// Late: the key's values are set by an UPDATE after every insert (a
	// key of a cycle, or a self key that may loop).
	Late bool
}

func (s *Schema) has(d Dialect) bool { return s.Dialect == d }

// Generate draws the schema of a seed.
func Generate(d Dialect, seed uint64) *Schema {
	r := rand.New(rand.NewPCG(seed, 0x1f2e3d4c5b6a7988))
	s := &Schema{Seed: seed, Dialect: d, Name: fmt.Sprintf("fz_%d", seed), Settings: map[string]string{}, Kept: map[string]bool{}}
	s.Family = pick(r, "text", "text", "uuid", "int")
	switch s.Family {
	case "text":
		// B differs from A in case only: a case-insensitive collation
		// calls them equal, the deleter must not.
		s.Tenants = map[Owner]string{"A": "acme", "B": "Acme", "C": "acme-2"}
	case "uuid":
		s.Tenants = map[Owner]string{"A": "6f1c2a10-0000-4000-8000-00000000000a", "B": "6f1c2a10-0000-4000-8000-00000000000b", "C": "6f1c2a10-0000-4000-8000-00000000000c"}
	case "int":
		s.Tenants = map[Owner]string{"A": "1001", "B": "1002", "C": "10010"}
	}
	n := 2 + r.IntN(5)
	for i := 0; i < n; i++ {
		s.Tables = append(s.Tables, s.newTable(r, i))
	}
	s.drawKeys(r)
	s.fill(r)
	s.drawTriggers(r)
	s.drawSettings(r)
	s.drawConfig(r)
	if s.has(Postgres) && seed%2 == 1 {
		s.Analyzed = true
		s.note("statistics gathered")
	}
	return s
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

func (s *Schema) tenantType(r *rand.Rand) string {
	switch {
	case s.has(Postgres) && s.Family == "text":
		return pick(r, "text", "varchar(64)", "char(12)")
	case s.has(Postgres) && s.Family == "uuid":
		return pick(r, "uuid", "uuid", "text")
	case s.has(Postgres):
		return pick(r, "int", "bigint")
	case s.Family == "text":
		return pick(r, "VARCHAR(64)", "CHAR(12)", "VARCHAR(64) COLLATE utf8mb4_bin")
	case s.Family == "uuid":
		return pick(r, "CHAR(36)", "VARCHAR(36)")
	}
	return pick(r, "INT", "BIGINT")
}

func (s *Schema) newTable(r *rand.Rand, i int) *Table {
	t := &Table{Name: fmt.Sprintf("t%d", i), Cols: map[string]bool{}}
	if r.IntN(8) == 0 {
		t.Name = fmt.Sprintf("T%d_Mixed", i)
	}
	if r.IntN(4) != 0 {
		t.Tenant = "tenant_id"
		if s.has(MariaDB) && r.IntN(6) == 0 {
			t.Tenant = "Tenant_ID" // the same column to MySQL
			s.note("tenant column spelled Tenant_ID")
		}
		t.TenantType = s.tenantType(r)
		t.TenantNull = r.IntN(3) == 0
	}
	switch x := r.IntN(10); {
	case x < 7:
		t.PK = "id"
	case x < 9 && t.Tenant != "":
		t.PK = "tenant"
	default:
		t.PK = ""
	}
	if t.PK == "tenant" && t.TenantNull {
		t.TenantNull = false // a primary key column is NOT NULL
	}
	if s.has(Postgres) && t.PK == "id" && r.IntN(6) == 0 {
		t.Partitioned = true
		s.note("partitioned table")
	}
	if s.has(MariaDB) && r.IntN(10) == 0 {
		t.Versioned = true
		s.note("system-versioned table")
	}
	return t
}

func (s *Schema) note(n string) {
	for _, x := range s.Notes {
		if x == n {
			return
		}
	}
	s.Notes = append(s.Notes, n)
}

func (t *Table) addCol(name string, nullable bool) {
	if _, ok := t.Cols[name]; !ok {
		t.colOrder = append(t.colOrder, name)
	}
	t.Cols[name] = nullable
}

// referable reports whether a key can reference t by its id alone.
func (t *Table) referable() bool { return t.PK == "id" }

func (s *Schema) drawKeys(r *rand.Rand) {
	actions := []string{"NO ACTION", "RESTRICT", "CASCADE", "CASCADE", "SET NULL"}
	if s.has(Postgres) {
		actions = append(actions, "SET DEFAULT")
	}
	add := func(child, parent *Table, late bool) {
		k := &Key{Child: child, Parent: parent, Late: late}
		k.Col = fmt.Sprintf("%s_ref%d", strings.ToLower(parent.Name), len(s.Keys))
		k.Name = fmt.Sprintf("fk%d_%s", len(s.Keys), strings.ToLower(child.Name))
		k.Aligned = parent.PK == "tenant" && child.Tenant != "" && child.TenantType == parent.TenantType && r.IntN(4) != 0
		if !k.Aligned && !parent.referable() {
			return
		}
		if k.Aligned && child.TenantNull {
			return
		}
		k.Nullable = late || r.IntN(2) == 0
		k.Action = pick(r, actions...)
		if (k.Action == "SET NULL" || k.Action == "SET DEFAULT") && !k.Nullable {
			k.Action = "NO ACTION"
		}
		if k.Aligned && (k.Action == "SET NULL" || k.Action == "SET DEFAULT") {
			k.Action = "CASCADE" // SET NULL would clear the tenant column too
		}
		if s.has(Postgres) && k.Action == "NO ACTION" && r.IntN(4) == 0 {
			k.Deferrable = true
		}
		if child.Partitioned && k.Action == "SET DEFAULT" {
			k.Action = "SET NULL"
		}
		child.addCol(k.Col, k.Nullable)
		s.Keys = append(s.Keys, k)
	}
	for i, t := range s.Tables {
		for j := 0; j < i; j++ {
			if r.IntN(3) == 0 {
				add(t, s.Tables[j], false)
			}
		}
		if r.IntN(6) == 0 {
			add(t, t, true)
			s.note("self key")
		}
	}
	// A back edge closes a cycle.
	if len(s.Tables) > 1 && r.IntN(4) == 0 {
		i := r.IntN(len(s.Tables) - 1)
		j := i + 1 + r.IntN(len(s.Tables)-i-1)
		before := len(s.Keys)
		add(s.Tables[i], s.Tables[j], true)
		if len(s.Keys) > before {
			s.note("key cycle")
		}
	}
}

func (s *Schema) qualName(t *Table) string { return s.Name + "." + t.Name }
