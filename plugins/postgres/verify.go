package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lifecycled/lifecycled/sdk"
)

// Verify is the second half of the erasure's independent proof (the
// witness in Delete is the first): it re-reads the catalogue and counts the
// tenant's rows in every relation of the database that has a column named
// like a tenant column, in any case, whether or not the plan lists it: a
// trigger may have copied a row into any schema. It builds no model and
// follows no join: a table the model missed, a column spelled
// "Tenant_ID", rows a trigger kept or copied all count as left. Tables
// ignore_tables names, and lifecycled's own state store when it shares
// the database, are reported as kept.
func (d *deleter) Verify(ctx context.Context, req *sdk.VerifyRequest) (*sdk.VerifyResponse, error) {
	pool, cfg, _, err := d.ready(req.TenantID)
	if err != nil {
		return nil, err
	}
	scope, err := proofScope(ctx, pool, cfg)
	if err != nil {
		return nil, err
	}
	checks, err := countTenantRows(ctx, pool, cfg, scope, req.TenantID)
	if err != nil {
		return nil, err
	}
	return &sdk.VerifyResponse{Checks: checks}, nil
}

// scope is where the proof looks: every schema of the database but the
// system's, and the relations the config keeps on purpose.
type scope struct {
	schemas []string
	kept    map[string]string // "schema.name" -> why it is kept
}

// stateSchemas are the schemas of lifecycled's own PostgreSQL state store:
// its jobs, holds and ledger hold tenant ids by design (the record of the
// erasure), and are kept when the state store shares the database.
var stateSchemas = []string{"lifecycle", "dlq"}

// proofScope reads the catalogue afresh for the schemas to look in.
func proofScope(ctx context.Context, pool *pgxpool.Pool, cfg config) (scope, error) {
	cat, err := loadCatalog(ctx, pool, nil)
	if err != nil {
		return scope{}, err
	}
	sc := scope{kept: map[string]string{}}
	for _, name := range cfg.IgnoreTables {
		if r, err := cat.lookup(name); err == nil {
			sc.kept[cat.rels[cat.root(r.oid)].qualified()] = "ignore_tables: kept on purpose"
		} else if v, ok := cat.lookupMatview(name); ok {
			sc.kept[v.qualified()] = "ignore_tables: kept on purpose"
		}
	}
	in := map[string]bool{}
	for _, r := range cat.rels {
		in[r.schema] = true
	}
	for _, v := range cat.matviews {
		in[v.schema] = true
	}
	if _, ok := cat.byName[[2]string{"lifecycle", "deletion_jobs"}]; ok {
		for _, r := range cat.rels {
			if slices.Contains(stateSchemas, r.schema) {
				sc.kept[r.qualified()] = "lifecycled's own state store: the record of the erasure"
			}
		}
	}
	for s := range in {
		sc.schemas = append(sc.schemas, s)
	}
	sort.Strings(sc.schemas)
	return sc, nil
}

// candidate is a relation with a column that may hold tenant ids.
type candidate struct {
	oid          uint32
	schema, name string
	kind         string // relkind
	column       string
	base         string    // the column's base type, "pg_catalog.uuid"
	hidden       bool      // row-level security may hide rows from the role
	root         [2]string // the top of its partition or inheritance tree: schema, name
}

func (c candidate) qualified() string { return c.schema + "." + c.name }

// countTenantRows counts the tenant's rows in every candidate relation.
func countTenantRows(ctx context.Context, pool *pgxpool.Pool, cfg config, sc scope, tenant string) ([]sdk.ProofCheck, error) {
	var lower []string
	for _, n := range cfg.TenantColumnNames() {
		lower = append(lower, strings.ToLower(n))
	}
	rows, err := pool.Query(ctx, `
		WITH RECURSIVE up(oid, top, depth) AS (
			SELECT c.oid, c.oid, 0 FROM pg_class c
			UNION ALL SELECT up.oid, i.inhparent, up.depth + 1 FROM up JOIN pg_inherits i ON i.inhrelid = up.top WHERE up.depth < 64)
		SELECT c.oid::int8, n.nspname::text, c.relname::text, c.relkind::text, a.attname::text, bn.nspname || '.' || bt.typname,
			c.relrowsecurity AND (c.relforcerowsecurity OR NOT pg_has_role(current_user, c.relowner, 'USAGE'))
				AND NOT (SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user),
			(SELECT ARRAY[tn.nspname::text, tc.relname::text] FROM up JOIN pg_class tc ON tc.oid = up.top JOIN pg_namespace tn ON tn.oid = tc.relnamespace
				WHERE up.oid = c.oid ORDER BY up.depth DESC LIMIT 1)
		FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
			CROSS JOIN LATERAL (`+baseTypeOf("a.atttypid")+`) base
			JOIN pg_type bt ON bt.oid = base.oid JOIN pg_namespace bn ON bn.oid = bt.typnamespace
		WHERE a.attnum > 0 AND NOT a.attisdropped AND lower(a.attname) = ANY($1)
			AND c.relkind IN ('r', 'f', 'm') AND n.nspname = ANY($2)
		ORDER BY 2, 3, 5`, lower, sc.schemas)
	if err != nil {
		return nil, classify(fmt.Errorf("proof: read the catalogue: %w", err))
	}
	var cands []candidate
	for rows.Next() {
		var c candidate
		var oid int64
		var root []string
		if err := rows.Scan(&oid, &c.schema, &c.name, &c.kind, &c.column, &c.base, &c.hidden, &root); err != nil {
			rows.Close()
			return nil, classify(err)
		}
		c.oid = uint32(oid)
		copy(c.root[:], root)
		// The tenant column of a table is the one the config names for
		// it (tenant_columns, else tenant_column), in any case: a column
		// named like another table's tenant column is not this one's.
		if strings.EqualFold(c.column, cfg.tenantColumnOf(c.root[0], c.root[1])) {
			cands = append(cands, c)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, classify(fmt.Errorf("proof: read the catalogue: %w", err))
	}
	var out []sdk.ProofCheck
	for _, c := range cands {
		kind := sdk.ProofTenantItems
		why, kept := sc.kept[c.root[0]+"."+c.root[1]]
		if !kept {
			why, kept = sc.kept[c.qualified()]
		}
		if kept {
			kind = sdk.ProofKept
		}
		if c.hidden && kind != sdk.ProofKept {
			return nil, sdk.Permanent(fmt.Errorf("proof: %s has row-level security that may hide rows from the deleter's role, so its tenant rows cannot be counted: "+
				"connect as a role with BYPASSRLS, or add it to ignore_tables if it is not tenant data", c.qualified()))
		}
		cond, arg, possible := tenantMatch(c, tenant)
		check := sdk.ProofCheck{Kind: kind, Target: c.qualified() + "." + c.column}
		if possible {
			// ONLY: a parent of an inheritance tree is counted apart from
			// its children, each of which is a candidate of its own.
			q := fmt.Sprintf("SELECT count(*) FROM ONLY %s a WHERE %s", pgx.Identifier{c.schema, c.name}.Sanitize(), cond)
			if err := pool.QueryRow(ctx, q, arg).Scan(&check.Found); err != nil {
				return nil, classify(fmt.Errorf("proof: count the tenant's rows in %s: %w", c.qualified(), err))
			}
		}
		if kept {
			check.Detail = why
		}
		out = append(out, check)
	}
	return out, nil
}

// tenantMatch is the condition on a.<column> that the row holds the tenant
// id, compared as the column's type compares (text types as text, a uuid
// as a uuid, numbers by value), and false where no value of the type can
// be the id. A type it does not know is compared as its text.
func tenantMatch(c candidate, tenant string) (cond string, arg any, possible bool) {
	col := "a." + pgx.Identifier{c.column}.Sanitize()
	col0 := catColumn{base: c.base}
	switch col0.kind() {
	case "text", "varchar", "bpchar", "citext":
		return col + " = $1", tenant, true
	case "uuid":
		if !canonicalUUID.MatchString(tenant) {
			return "", nil, false
		}
		return col + " = $1::uuid", tenant, true
	case "int2", "int4", "int8":
		if _, err := strconv.ParseInt(tenant, 10, 64); err != nil || !canonicalInt.MatchString(tenant) {
			return "", nil, false
		}
		return col + " = $1::int8", tenant, true
	case "numeric":
		if !canonicalNumeric.MatchString(tenant) {
			return "", nil, false
		}
		return col + " = $1::numeric", tenant, true
	}
	return col + "::text = $1", tenant, true
}

var _ sdk.Verifier = (*deleter)(nil)
