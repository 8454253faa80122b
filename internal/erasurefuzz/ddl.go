package erasurefuzz

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// quote quotes an identifier for the dialect.
func (s *Schema) quote(name string) string {
	if s.has(Postgres) {
		return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
	}
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

// qual is a table's qualified, quoted name.
func (s *Schema) qual(t *Table) string { return s.quote(s.Name) + "." + s.quote(t.Name) }

// idType is the type of ids and key columns.
func (s *Schema) idType() string {
	if s.has(Postgres) {
		return "int"
	}
	return "INT"
}

// DDL is the script that creates the schema, its tables and keys (not the
// triggers: Script puts them after the data).
func (s *Schema) DDL() string {
	var b strings.Builder
	if s.has(Postgres) {
		fmt.Fprintf(&b, "CREATE SCHEMA %s;\n", s.quote(s.Name))
	}
	tables := append([]*Table(nil), s.Tables...)
	if s.Audit != nil {
		tables = append(tables, s.Audit)
	}
	for _, t := range tables {
		b.WriteString(s.createTable(t))
	}
	for _, k := range s.Keys {
		b.WriteString(s.createKey(k))
	}
	if s.Audit != nil {
		// Every audit row a trigger writes is counted here too (a table
		// the deleter has no reason to touch), so that the rows an
		// attempt wrote and removed again are known.
		fmt.Fprintf(&b, "CREATE TABLE %s (n int);\n", s.trail())
	}
	return b.String()
}

// trail is the table counting audit rows written.
func (s *Schema) trail() string { return s.quote(s.Name) + "." + s.quote("fz_trail") }

func (s *Schema) createTable(t *Table) string {
	cols := []string{s.quote("id") + " " + s.idType() + " NOT NULL"}
	if t.Tenant != "" {
		null := " NOT NULL"
		if t.TenantNull {
			null = " NULL"
		}
		cols = append(cols, s.quote(t.Tenant)+" "+t.TenantType+null)
	}
	for _, c := range t.colOrder {
		null := " NOT NULL"
		if t.Cols[c] {
			null = " NULL DEFAULT NULL"
		}
		cols = append(cols, s.quote(c)+" "+s.idType()+null)
	}
	text := "text"
	if s.has(MariaDB) {
		text = "VARCHAR(64)"
	}
	cols = append(cols, s.quote("v")+" "+text+" NULL", s.quote("fz_owner")+" "+map[bool]string{true: "varchar(2)", false: "VARCHAR(2)"}[s.has(Postgres)]+" NOT NULL")
	switch t.PK {
	case "id":
		cols = append(cols, "PRIMARY KEY ("+s.quote("id")+")")
	case "tenant":
		cols = append(cols, "PRIMARY KEY ("+s.quote(t.Tenant)+", "+s.quote("id")+")")
	}
	ddl := fmt.Sprintf("CREATE TABLE %s (\n\t%s)", s.qual(t), strings.Join(cols, ",\n\t"))
	switch {
	case t.Partitioned:
		ddl += " PARTITION BY HASH (id);\n"
		for i := 0; i < 2; i++ {
			ddl += fmt.Sprintf("CREATE TABLE %s PARTITION OF %s FOR VALUES WITH (MODULUS 2, REMAINDER %d);\n",
				s.quote(s.Name)+"."+s.quote(fmt.Sprintf("%s_p%d", t.Name, i)), s.qual(t), i)
		}
		return ddl
	case t.Versioned:
		return ddl + " ENGINE=InnoDB WITH SYSTEM VERSIONING;\n"
	case s.has(MariaDB):
		return ddl + " ENGINE=InnoDB;\n"
	}
	return ddl + ";\n"
}

func (s *Schema) createKey(k *Key) string {
	from, to := s.quote(k.Col), s.quote("id")
	if k.Aligned {
		from = s.quote(k.Child.Tenant) + ", " + from
		to = s.quote(k.Parent.Tenant) + ", " + to
	}
	def := ""
	if k.Deferrable {
		def = " DEFERRABLE"
	}
	return fmt.Sprintf("ALTER TABLE %s ADD CONSTRAINT %s FOREIGN KEY (%s) REFERENCES %s (%s) ON DELETE %s%s;\n",
		s.qual(k.Child), s.quote(k.Name), from, s.qual(k.Parent), to, k.Action, def)
}

// literal renders a tenant id as an SQL literal of the table's column.
func (s *Schema) tenantLiteral(o Owner) string {
	if o == "G" {
		return "NULL"
	}
	return "'" + s.Tenants[o] + "'"
}

// Data is the script that inserts the rows: the keys of a cycle and self
// keys by UPDATE once every row is in.
func (s *Schema) Data() string {
	var b strings.Builder
	late := map[string]bool{}
	for _, k := range s.Keys {
		if k.Late {
			late[k.Child.Name+"."+k.Col] = true
		}
	}
	for _, t := range s.Tables {
		for _, row := range t.Rows {
			names := []string{s.quote("id")}
			vals := []string{fmt.Sprint(row.ID)}
			if t.Tenant != "" {
				names = append(names, s.quote(t.Tenant))
				vals = append(vals, s.tenantLiteral(row.Owner))
			}
			for _, c := range t.colOrder {
				v := "NULL"
				if ref := row.Refs[c]; ref != nil && !late[t.Name+"."+c] {
					v = fmt.Sprint(*ref)
				}
				names = append(names, s.quote(c))
				vals = append(vals, v)
			}
			names = append(names, s.quote("v"), s.quote("fz_owner"))
			vals = append(vals, fmt.Sprintf("'row %d'", row.ID), "'"+string(row.Owner)+"'")
			fmt.Fprintf(&b, "INSERT INTO %s (%s) VALUES (%s);\n", s.qual(t), strings.Join(names, ", "), strings.Join(vals, ", "))
		}
	}
	for _, k := range s.Keys {
		if !k.Late {
			continue
		}
		for _, row := range k.Child.Rows {
			if ref := row.Refs[k.Col]; ref != nil {
				fmt.Fprintf(&b, "UPDATE %s SET %s = %d WHERE %s = %d;\n", s.qual(k.Child), s.quote(k.Col), *ref, s.quote("id"), row.ID)
			}
		}
	}
	return b.String()
}

// Script is everything: tables, keys, rows, triggers, alterations.
func (s *Schema) Script() []string {
	out := []string{s.DDL(), s.Data()}
	out = append(out, s.Triggers...)
	out = append(out, s.Alter...)
	if s.Analyzed {
		for _, t := range s.Tables {
			out = append(out, "ANALYZE "+s.qual(t))
		}
	}
	return out
}

// ownerExpr is the fz_owner an audit row gets: the deleted row's, when
// the audit row carries its tenant id, else nobody's.
func (s *Schema) auditValues(t *Table) (tenant, owner string) {
	if t.Tenant == "" {
		return "NULL", "'N'"
	}
	col := "OLD." + s.quote(t.Tenant)
	if s.has(Postgres) {
		col += "::text"
	}
	return col, "CASE WHEN " + col + " IS NULL THEN 'G' ELSE OLD.fz_owner END"
}

func (s *Schema) auditTrigger(t *Table) string {
	tenant, owner := s.auditValues(t)
	ins := fmt.Sprintf("INSERT INTO %s (id, tenant_id, v, fz_owner) VALUES (OLD.id, %s, 'deleted', %s); INSERT INTO %s VALUES (1)",
		s.qual(s.Audit), tenant, owner, s.trail())
	name := "audit_" + strings.ToLower(t.Name)
	if s.has(Postgres) {
		fn := s.quote(s.Name) + "." + s.quote(name)
		return fmt.Sprintf("CREATE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN %s; RETURN OLD; END $$;\n"+
			"CREATE TRIGGER %s AFTER DELETE ON %s FOR EACH ROW EXECUTE FUNCTION %s();\n", fn, ins, s.quote(name), s.qual(t), fn)
	}
	return fmt.Sprintf("CREATE TRIGGER %s.%s AFTER DELETE ON %s FOR EACH ROW BEGIN %s; END", s.quote(s.Name), s.quote(name), s.qual(t), ins)
}

func (s *Schema) softDeleteTrigger(t *Table) string {
	name := "soft_" + strings.ToLower(t.Name)
	if s.has(Postgres) {
		fn := s.quote(s.Name) + "." + s.quote(name)
		return fmt.Sprintf("CREATE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN UPDATE %s SET v = 'soft-deleted' WHERE id = OLD.id; RETURN NULL; END $$;\n"+
			"CREATE TRIGGER %s BEFORE DELETE ON %s FOR EACH ROW EXECUTE FUNCTION %s();\n", fn, s.qual(t), s.quote(name), s.qual(t), fn)
	}
	tenant, owner := s.auditValues(t)
	return fmt.Sprintf("CREATE TRIGGER %s.%s BEFORE DELETE ON %s FOR EACH ROW BEGIN INSERT INTO %s (id, tenant_id, v, fz_owner) VALUES (OLD.id, %s, 'archived', %s); INSERT INTO %s VALUES (1); END",
		s.quote(s.Name), s.quote(name), s.qual(t), s.qual(s.Audit), tenant, owner, s.trail())
}

// cleanupTrigger makes another table with the tenant column hold, in a
// column without a key, the id of a row of t of the same owner, and a
// trigger on t delete those rows after t's (as Sakila's del_film deletes
// film_text).
func (s *Schema) cleanupTrigger(r *rand.Rand, t *Table) string {
	// Like film_text: a table no key references. A trigger that deleted
	// rows other rows still reference would fail the erasure part way, in
	// code the deleter cannot read (docs/plugins.md says so).
	var us []*Table
	for _, u := range s.Tables {
		referenced := false
		for _, k := range s.Keys {
			referenced = referenced || k.Parent == u
		}
		if u != t && u.Tenant != "" && !u.Versioned && !referenced {
			us = append(us, u)
		}
	}
	if len(us) == 0 {
		return ""
	}
	u := us[r.IntN(len(us))]
	col := "of_" + strings.ToLower(t.Name)
	u.addCol(col, true)
	for _, row := range u.Rows {
		var same []*Row
		for _, p := range t.Rows {
			if p.Owner == row.Owner {
				same = append(same, p)
			}
		}
		if len(same) > 0 && r.IntN(4) != 0 {
			id := same[r.IntN(len(same))].ID
			row.Refs[col] = &id
		}
	}
	del := fmt.Sprintf("DELETE FROM %s WHERE %s = OLD.id", s.qual(u), s.quote(col))
	name := "cleanup_" + strings.ToLower(t.Name)
	if s.has(Postgres) {
		fn := s.quote(s.Name) + "." + s.quote(name)
		return fmt.Sprintf("CREATE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN %s; RETURN OLD; END $$;\n"+
			"CREATE TRIGGER %s AFTER DELETE ON %s FOR EACH ROW EXECUTE FUNCTION %s();\n", fn, del, s.quote(name), s.qual(t), fn)
	}
	return fmt.Sprintf("CREATE TRIGGER %s.%s AFTER DELETE ON %s FOR EACH ROW %s", s.quote(s.Name), s.quote(name), s.qual(t), del)
}
