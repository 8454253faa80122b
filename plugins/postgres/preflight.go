package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lifecycled/lifecycled/internal/fkgraph"
	"github.com/lifecycled/lifecycled/internal/sqldelete"
)

// preflight looks, before anything is deleted, for every row outside this
// tenant's data that deleting it would remove, change or trip over:
//
//   - rows of other tenants, or of tables this deleter does not delete,
//     that reference the tenant's rows through any key (CASCADE would delete
//     them, SET NULL/DEFAULT would change them, NO ACTION/RESTRICT would
//     make the delete fail half way);
//   - the tenant's own rows that a SET NULL/DEFAULT key in a cycle would
//     take out of the tenant (tenant column nulled, or the only key through
//     which a row without a tenant column belongs to it);
//   - rows without a tenant column that reference rows of two tenants.
//
// Any of these refuses the whole deletion with a permanent error naming the
// key, the table and how many rows; nothing has been changed. Every key is
// checked here, NO ACTION and RESTRICT ones too: leaving those to the
// database would stop the erasure half way, with the tenant's rows in the
// tables deleted before gone and the rest still there.
func preflight(ctx context.Context, pool *pgxpool.Pool, m *model, tenant string) error {
	problems, err := sqldelete.InboundKeys[*keyEdge]{
		Inbound: m.inbound, Dropped: m.dropped, StripsTenant: setNullStripsTenant, Aligned: aligned, Describe: describeProblem,
		Count: func(e *keyEdge, stripping bool) (int64, error) {
			return otherRowsReferencing(ctx, pool, e, tenant, stripping)
		},
	}.Problems()
	if err != nil {
		return err
	}
	for _, t := range m.tables {
		if t.tenant != nil || len(t.owners) < 2 {
			continue
		}
		p := &predicate{}
		var other []string
		for _, e := range t.owners {
			b := p.alias()
			// A global row (NULL tenant column) is nobody's: a row linking
			// this tenant's row to one is this tenant's.
			global := ""
			if m.globalRows && e.parentT.tenant != nil {
				global = fmt.Sprintf(" AND %s.%s IS NOT NULL", b, pgx.Identifier{e.parentT.tenant.name}.Sanitize())
			}
			other = append(other, fmt.Sprintf("EXISTS (SELECT 1 FROM %s %s WHERE (%s) = (%s) AND (%s) IS NOT TRUE%s)",
				e.parent.scan(), b, cols(b, e.fk.refCols), cols("c", e.fk.fkCols), p.own(e.parentT, b), global))
		}
		q := fmt.Sprintf("SELECT count(*) FROM %s c WHERE %s AND (%s)", t.rel.ident(), p.own(t, "c"), strings.Join(other, " OR "))
		var n int64
		if err := pool.QueryRow(ctx, q, tenant).Scan(&n); err != nil {
			return classify(fmt.Errorf("preflight check of %s: %w", t.name(), err))
		}
		if n > 0 {
			problems = append(problems, sqldelete.TwoTenantsProblem(n, t.name()))
		}
	}
	return sqldelete.Refused(problems)
}

// otherRowsReferencing counts the rows of e's child that reference rows the deletion
// removes but are not themselves this tenant's rows deleted with them (with
// stripping, every such row: the key's SET NULL would strip the tenant).
func otherRowsReferencing(ctx context.Context, pool *pgxpool.Pool, e *keyEdge, tenant string, stripping bool) (int64, error) {
	p := &predicate{}
	ok := "false"
	switch {
	case stripping:
	case e.childT != nil && e.childT.listed:
		ok = p.own(e.childT, "c")
	case e.childT != nil && e.fk.action == 'c':
		ok = p.own(e.childT, "c") // this tenant's rows of a target, deleted by the cascade
	}
	q := fmt.Sprintf("SELECT count(*) FROM %s c WHERE %s AND (%s) IS NOT TRUE", e.child.scan(), p.references(e, "c"), ok)
	var n int64
	if err := pool.QueryRow(ctx, q, tenant).Scan(&n); err != nil {
		return 0, classify(fmt.Errorf("preflight check of %s: %w", e.fk.name, err))
	}
	return n, nil
}

// aligned reports whether a key into the set maps a listed child's tenant
// column onto its parent's (Citus-style composite keys): a referencing row
// then has the parent's tenant, so no other tenant's row can be reached.
func aligned(e *keyEdge) bool {
	if e.childT == nil || !e.childT.listed || e.childT.tenant == nil || e.parentT.tenant == nil {
		return false
	}
	for i, c := range e.fk.fkCols {
		if c == e.childT.tenant.name && e.fk.refCols[i] == e.parentT.tenant.name {
			return true
		}
	}
	return false
}

func describeProblem(e *keyEdge, n int64, stripping bool) string {
	child := e.child.qualified()
	if stripping {
		what := "the key through which they belong to the tenant"
		if e.childT.tenant != nil {
			what = e.childT.tenant.name
		}
		return fmt.Sprintf("%s (%s) would run ON DELETE %s on %s of this tenant in %s, because the key is in a cycle and its parent rows go first, "+
			"and set %s to NULL, leaving them behind: declare it ON DELETE SET NULL (only the non-tenant columns), or DEFERRABLE",
			e.fk.name, e.describe(), strings.TrimPrefix(actionName(e.fk), "ON DELETE "), fkgraph.Rows(n), child, what)
	}
	return fkgraph.Referencing{Rows: n, Child: child, Parent: e.parent.qualified(), Key: e.fk.name, Action: e.fk.action,
		ActionName: actionName(e.fk), Unlisted: e.childT == nil}.Problem()
}
