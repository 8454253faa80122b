package main

import (
	"fmt"
	"strings"
)

// predicate builds SQL conditions over the tenant id and collects the
// arguments in the order of their placeholders: every part must be built
// in the order it appears in the statement.
type predicate struct {
	vals map[*logicalTable]any // the id as bound for each table's tenant column
	args []any
	n    int
}

func newPredicate(vals map[*logicalTable]any) *predicate { return &predicate{vals: vals} }

func (p *predicate) alias() string {
	p.n++
	return fmt.Sprintf("l%d", p.n)
}

// own is true for rows of t (as alias a) that belong to the tenant.
func (p *predicate) own(t *logicalTable, a string) string {
	if t.tenant != nil {
		return p.match(t, a)
	}
	var ors []string
	for _, e := range t.owners {
		ors = append(ors, p.references(e, a))
	}
	return "(" + strings.Join(ors, " OR ") + ")"
}

// match compares t's tenant column with the id: byte for byte in the
// column's character set, after an ordinary comparison in the column's
// collation that lets the server use an index on it (and finds a superset:
// the ids the collation takes for equal).
func (p *predicate) match(t *logicalTable, a string) string {
	c := t.tenant
	col := a + "." + quoteIdent(c.name)
	v := p.vals[t]
	if c.kind() == kindText {
		p.args = append(p.args, v, v)
		return fmt.Sprintf("(%s = CONVERT(? USING %s) COLLATE %s AND CAST(%s AS BINARY) = CAST(CONVERT(? USING %s) AS BINARY))",
			col, c.charset, c.collation, col, c.charset)
	}
	p.args = append(p.args, v)
	return col + " = ?"
}

// loose is match without the byte-for-byte part: the rows the column's
// collation takes for the tenant's.
func (p *predicate) loose(t *logicalTable, a string) string {
	c := t.tenant
	p.args = append(p.args, p.vals[t])
	return fmt.Sprintf("%s.%s = CONVERT(? USING %s) COLLATE %s", a, quoteIdent(c.name), c.charset, c.collation)
}

// gone is true for rows of t (as alias a) that deleting the tenant removes:
// its own rows in the set, and in a target the tenant's rows that a cascade
// from the set would reach.
func (p *predicate) gone(t *logicalTable, a string) string {
	if t.listed {
		return p.own(t, a)
	}
	own := p.own(t, a)
	var ors []string
	for _, e := range t.cascadeFrom {
		ors = append(ors, p.references(e, a))
	}
	return "(" + own + " AND (" + strings.Join(ors, " OR ") + "))"
}

// references is true for rows of e's child (as alias a) that reference a
// row of e's parent that the deletion removes. The columns compare as the
// key compares them (MySQL requires one collation on both sides).
func (p *predicate) references(e *keyEdge, a string) string {
	b := p.alias()
	return fmt.Sprintf("(%s) IN (SELECT %s FROM %s %s WHERE %s)",
		cols(a, e.fk.fkCols), cols(b, e.fk.refCols), e.parent.ident(), b, p.gone(e.parentT, b))
}

// cols renders alias.col, ... for a row comparison.
func cols(alias string, names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = alias + "." + quoteIdent(n)
	}
	return strings.Join(out, ", ")
}
