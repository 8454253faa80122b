package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/lifecycled/lifecycled/internal/fkgraph"
	"github.com/lifecycled/lifecycled/internal/sqldelete"
)

// preflight looks, before anything is deleted, for every row outside this
// tenant's data that deleting it would remove, change or trip over:
//
//   - rows of other tenants, or of tables this deleter does not delete,
//     that reference the tenant's rows through any key (CASCADE would delete
//     them, SET NULL would change them, NO ACTION/RESTRICT would make the
//     delete fail half way);
//
//   - the tenant's own rows that a SET NULL key given up in a cycle would
//     take out of the tenant (tenant column nulled, or the only key through
//     which a row without a tenant column belongs to it);
//
//   - rows without a tenant column that reference rows of two tenants.
//
//   - this tenant's rows that reference each other in a loop through a
//     self key whose only column that may be NULL is the tenant column:
//     MySQL checks keys row by row, and a loop can only be cut by clearing
//     a column of the key, never the tenant column.
//
// Any of these refuses the whole deletion with a permanent error naming the
// key, the table and how many rows; nothing has been changed. Every key is
// checked here, NO ACTION and RESTRICT ones too: leaving those to the
// server stopped the erasure half way (and with foreign_key_checks = 0 in
// a DSN, not at all).
func preflight(ctx context.Context, db *sql.DB, m *model, vals map[*logicalTable]any) error {
	problems, err := sqldelete.InboundKeys[*keyEdge]{
		Inbound: m.inbound, Dropped: m.dropped, StripsTenant: setNullStripsTenant, Aligned: aligned, Describe: describeProblem,
		Count: func(e *keyEdge, stripping bool) (int64, error) {
			return otherRowsReferencing(ctx, db, e, vals, stripping)
		},
	}.Problems()
	if err != nil {
		return err
	}
	for _, t := range m.tables {
		if t.tenant != nil || len(t.owners) < 2 {
			continue
		}
		p := newPredicate(vals)
		own := p.own(t, "c")
		var other []string
		for _, e := range t.owners {
			b := p.alias()
			// A global row (NULL tenant column) is nobody's: a row linking
			// this tenant's row to one is this tenant's.
			global := ""
			if m.globalRows && e.parentT.tenant != nil {
				global = fmt.Sprintf(" AND %s.%s IS NOT NULL", b, quoteIdent(e.parentT.tenant.name))
			}
			other = append(other, fmt.Sprintf("EXISTS (SELECT 1 FROM %s %s WHERE (%s) = (%s) AND (%s) IS NOT TRUE%s)",
				e.parent.ident(), b, cols(b, e.fk.refCols), cols("c", e.fk.fkCols), p.own(e.parentT, b), global))
		}
		q := fmt.Sprintf("SELECT COUNT(*) FROM %s c WHERE %s AND (%s)", t.cat.ident(), own, strings.Join(other, " OR "))
		var n int64
		if err := db.QueryRowContext(ctx, q, p.args...).Scan(&n); err != nil {
			return classify(fmt.Errorf("preflight check of %s: %w", t.name(), err))
		}
		if n > 0 {
			problems = append(problems, sqldelete.TwoTenantsProblem(n, t.name()))
		}
	}
	for _, e := range m.stuckLoops {
		t := e.childT
		p := newPredicate(vals)
		own, ownB := p.own(t, "a"), ""
		b := p.alias()
		ownB = p.own(t, b)
		var n int64
		q := fmt.Sprintf("SELECT COUNT(*) FROM %s a WHERE %s AND (%s) IN (SELECT %s FROM %s %s WHERE %s)",
			t.cat.ident(), own, cols("a", e.fk.fkCols), cols(b, e.fk.refCols), t.cat.ident(), b, ownB)
		if err := db.QueryRowContext(ctx, q, p.args...).Scan(&n); err != nil {
			return classify(fmt.Errorf("preflight check of %s: %w", e.fk.name, err))
		}
		if n > 0 {
			problems = append(problems, fmt.Sprintf(
				"%s of %s reference this tenant's rows through %s (%s), whose columns other than the tenant column do not allow NULL: "+
					"MySQL checks keys row by row, so rows that reference each other in a loop cannot be deleted, and the loop is never cut through the tenant column; "+
					"allow NULL in a column of the key other than the tenant column (the deleter then clears it inside its transaction)",
				fkgraph.Rows(n), t.name(), e.fk.name, e.describe()))
		}
	}
	return sqldelete.Refused(problems)
}

// otherRowsReferencing counts the rows of e's child that reference rows the deletion
// removes but are not themselves rows it removes first (with stripping,
// every such row: the key's SET NULL would strip the tenant).
func otherRowsReferencing(ctx context.Context, db *sql.DB, e *keyEdge, vals map[*logicalTable]any, stripping bool) (int64, error) {
	p := newPredicate(vals)
	refs := p.references(e, "c")
	ok := "FALSE"
	if !stripping && e.childT != nil {
		ok = p.gone(e.childT, "c")
	}
	q := fmt.Sprintf("SELECT COUNT(*) FROM %s c WHERE %s AND (%s) IS NOT TRUE", e.child.ident(), refs, ok)
	var n int64
	if err := db.QueryRowContext(ctx, q, p.args...).Scan(&n); err != nil {
		return 0, classify(fmt.Errorf("preflight check of %s: %w", e.fk.name, err))
	}
	return n, nil
}

// aligned reports whether a key maps a listed child's tenant column onto
// its parent's (composite keys led by the tenant): a referencing row then
// has the parent's tenant. Only for columns that compare exactly: a key on
// a text column compares by its collation, so a row of tenant "ACME" can
// reference a row of tenant "acme".
func aligned(e *keyEdge) bool {
	if e.childT == nil || !e.childT.listed || e.childT.tenant == nil || e.parentT.tenant == nil {
		return false
	}
	if e.childT.tenant.kind() == kindText || e.parentT.tenant.kind() == kindText {
		return false
	}
	for i, c := range e.fk.fkCols {
		if strings.EqualFold(c, e.childT.tenant.name) && strings.EqualFold(e.fk.refCols[i], e.parentT.tenant.name) {
			return true
		}
	}
	return false
}

func describeProblem(e *keyEdge, n int64, stripping bool) string {
	child := e.child.name()
	if stripping {
		what := "the key through which they belong to the tenant"
		if e.childT.tenant != nil {
			what = e.childT.tenant.name
		}
		return fmt.Sprintf("%s (%s) would run %s on %s of this tenant in %s, because the key is in a cycle and its parent rows go first, "+
			"and set %s to NULL, leaving them behind: make it SET NULL only on columns that are not the tenant column",
			e.fk.name, e.describe(), actionName(e.fk), fkgraph.Rows(n), child, what)
	}
	return fkgraph.Referencing{Rows: n, Child: child, Parent: e.parent.name(), Key: e.fk.name, Action: e.fk.action,
		ActionName: actionName(e.fk), Unlisted: e.childT == nil}.Problem()
}
