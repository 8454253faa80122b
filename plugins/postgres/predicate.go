package main

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// predicate builds SQL conditions over the tenant parameter $1.
type predicate struct{ n int }

func (p *predicate) alias() string {
	p.n++
	return fmt.Sprintf("l%d", p.n)
}

// own is true for rows of t (as alias a) that belong to the tenant.
func (p *predicate) own(t *logicalTable, a string) string {
	if t.tenant != nil {
		// $1 is one parameter for every table of a statement, whose tenant
		// columns may differ in type (uuid here, text there): it is sent
		// as text and cast to each column's base type, never to a type
		// with a length (which would cut the id short).
		nsp, typ, _ := strings.Cut(t.tenant.base, ".")
		return a + "." + pgx.Identifier{t.tenant.name}.Sanitize() + " = $1::text::" + pgx.Identifier{nsp, typ}.Sanitize()
	}
	var ors []string
	for _, e := range t.owners {
		ors = append(ors, p.references(e, a))
	}
	return "(" + strings.Join(ors, " OR ") + ")"
}

// gone is true for rows of t (as alias a) that deleting the tenant removes:
// its own rows in the set, and rows a cascade reaches in a target.
func (p *predicate) gone(t *logicalTable, a string) string {
	if t.listed {
		return p.own(t, a)
	}
	var ors []string
	for _, e := range t.cascadeFrom {
		// The key covers the rows of the relation it is declared on (a
		// partition, perhaps), not the whole tree.
		ors = append(ors, fmt.Sprintf("(%s.tableoid = ANY('%s'::oid[]) AND %s)", a, oidArray(e.childTree), p.references(e, a)))
	}
	return "(" + p.own(t, a) + " AND (" + strings.Join(ors, " OR ") + "))"
}

func oidArray(oids []uint32) string {
	parts := make([]string, len(oids))
	for i, o := range oids {
		parts[i] = fmt.Sprint(o)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// references is true for rows of e's child (as alias a) that reference a
// row of e's parent that the deletion removes. Each referencing column is
// compared as the key compares it: as the referenced column's type when the
// two differ (text referencing char(n) ignores trailing blanks).
func (p *predicate) references(e *keyEdge, a string) string {
	b := p.alias()
	return fmt.Sprintf("(%s) IN (SELECT %s FROM %s %s WHERE %s)",
		keyCols(a, e.fk.fkCols, e.fk.refTypes), cols(b, e.fk.refCols), e.parent.scan(), b, p.gone(e.parentT, b))
}

// keyCols renders the referencing columns, cast where the key compares them
// as another type.
func keyCols(alias string, names, as []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = alias + "." + pgx.Identifier{n}.Sanitize()
		if i < len(as) && as[i] != "" {
			out[i] = "(" + out[i] + ")::" + as[i]
		}
	}
	return strings.Join(out, ", ")
}

// cols renders alias.col, ... for a row comparison.
func cols(alias string, names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = alias + "." + pgx.Identifier{n}.Sanitize()
	}
	return strings.Join(out, ", ")
}

// leafReady is true for rows of t (as alias a) that no other row of the
// same tree references through a self key: deleting those first can never
// violate the key, at any batch size.
func (p *predicate) leafReady(t *logicalTable, a string) string {
	var ands []string
	for _, e := range t.self {
		c := p.alias()
		ands = append(ands, fmt.Sprintf("NOT EXISTS (SELECT 1 FROM %s %s WHERE (%s) = (%s) AND (%s.tableoid, %s.ctid) <> (%s.tableoid, %s.ctid))",
			e.child.scan(), c, cols(c, e.fk.fkCols), cols(a, e.fk.refCols), c, c, a, a))
	}
	return strings.Join(ands, " AND ")
}
