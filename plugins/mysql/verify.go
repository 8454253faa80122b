package main

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/lifecycled/lifecycled/sdk"
)

// Verify is the second half of the erasure's independent proof (the
// witness in Delete is the first): it re-reads the catalogue and counts the
// tenant's rows in every table that has the tenant column, in any case,
// listed or not, in the databases of the configured and ignored tables and
// of every table that references them; a system-versioned table with its
// history (FOR SYSTEM_TIME ALL). It builds no model and follows no join.
func (d *deleter) Verify(ctx context.Context, req *sdk.VerifyRequest) (*sdk.VerifyResponse, error) {
	db, cfg, err := d.ready(req.TenantID)
	if err != nil {
		return nil, err
	}
	cat, err := loadCatalog(ctx, db, cfg.TenantColumnNames())
	if err != nil {
		return nil, err
	}
	schemas, kept := proofScope(cfg, cat)
	var keys []tkey
	for k := range cat.tables {
		if schemas[k[0]] {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	var checks []sdk.ProofCheck
	for _, k := range keys {
		t := cat.tables[k]
		col, ok := t.col(cfg.tenantColumnFor(t))
		if !ok {
			continue
		}
		kind := sdk.ProofTenantItems
		if kept[k] {
			kind = sdk.ProofKept
		}
		c := sdk.ProofCheck{Kind: kind, Target: t.name() + "." + col.name}
		if kept[k] {
			c.Detail = "ignore_tables: kept on purpose"
		}
		cond, arg, possible := tenantMatch(col, req.TenantID)
		if possible {
			from := t.ident()
			if t.versioned {
				from += " FOR SYSTEM_TIME ALL"
				c.Detail = strings.TrimPrefix(c.Detail+"; with its history", "; ")
			}
			if err := db.QueryRowContext(ctx, fmt.Sprintf("SELECT COUNT(*) FROM %s a WHERE %s", from, cond), arg).Scan(&c.Found); err != nil {
				return nil, classify(fmt.Errorf("proof: count the tenant's rows in %s: %w", t.name(), err))
			}
		}
		checks = append(checks, c)
	}
	return &sdk.VerifyResponse{Checks: checks}, nil
}

// proofScope is where the proof looks: the databases of the set (discover's
// schemas, or the listed tables') and of the ignored tables, and of every
// table that references a table in them; and the tables kept on purpose.
func proofScope(cfg config, cat *catalog) (map[string]bool, map[tkey]bool) {
	in, kept := map[string]bool{}, map[tkey]bool{}
	if cfg.Discover {
		for _, s := range cfg.Schemas {
			in[s] = true
		}
	}
	for _, name := range cfg.Tables {
		if t, err := cat.lookup(name, cfg.database); err == nil {
			in[t.key[0]] = true
		}
	}
	for _, name := range cfg.IgnoreTables {
		if t, err := cat.lookup(name, cfg.database); err == nil {
			in[t.key[0]] = true
			kept[t.key] = true
		}
	}
	for grew := true; grew; {
		grew = false
		for _, f := range cat.fks {
			if in[f.parent[0]] && !in[f.child[0]] {
				in[f.child[0]] = true
				grew = true
			}
		}
		// A delete trigger may copy the tenant's rows into another
		// database (an audit schema): the databases its statement names
		// are looked in too. A procedure it calls is not read.
		for k, t := range cat.tables {
			if !in[k[0]] {
				continue
			}
			for _, trig := range t.deleteTriggers {
				for _, m := range qualifiedName.FindAllStringSubmatch(trig, -1) {
					if db := unquoteIdent(m[1]); cat.hasSchema(db) && !in[db] {
						in[db] = true
						grew = true
					}
				}
			}
		}
	}
	return in, kept
}

// qualifiedName finds database.table after the words that introduce a
// table in a statement.
var qualifiedName = regexp.MustCompile("(?i)(?:INTO|UPDATE|FROM|JOIN|TABLE)\\s+(`(?:[^`]|``)+`|[A-Za-z0-9_$]+)\\s*\\.\\s*(?:`(?:[^`]|``)+`|[A-Za-z0-9_$]+)")

func unquoteIdent(s string) string {
	if strings.HasPrefix(s, "`") && strings.HasSuffix(s, "`") && len(s) >= 2 {
		return strings.ReplaceAll(s[1:len(s)-1], "``", "`")
	}
	return s
}

// tenantMatch is the condition on a.<column> that the row holds the tenant
// id: byte for byte in the column's character set for text (whatever its
// collation calls equal), by value for integers; false where no value of
// the column can be the id. A type it does not know is compared as text.
func tenantMatch(c catColumn, tenant string) (cond string, arg any, possible bool) {
	col := "a." + quoteIdent(c.name)
	switch c.kind() {
	case kindText:
		if !safeName.MatchString(c.charset) {
			return fmt.Sprintf("CAST(%s AS BINARY) = CAST(? AS BINARY)", col), tenant, true
		}
		return fmt.Sprintf("CAST(%s AS BINARY) = CAST(CONVERT(? USING %s) AS BINARY)", col, c.charset), tenant, true
	case kindBytes:
		return col + " = ?", []byte(tenant), true
	case kindInt:
		v, err := tenantArg(tenant, c, "")
		if err != nil {
			return "", nil, false
		}
		return col + " = ?", v, true
	}
	return fmt.Sprintf("CAST(%s AS CHAR) = ?", col), tenant, true
}

var _ sdk.Verifier = (*deleter)(nil)
