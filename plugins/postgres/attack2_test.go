package main

// Cases from the second outside attack (after the independent proof and
// guarded sessions landed): settings and schemas under which the erasure
// still took another tenant's rows, or the proof said "nothing left"
// while the tenant's rows were elsewhere, or the erasure stopped half way.
// Each failed before its fix.

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/sdk"
)

const cafeSchema = `
CREATE TABLE customers (id int PRIMARY KEY, tenant_id text NOT NULL);
CREATE INDEX ON customers (tenant_id);
INSERT INTO customers VALUES (1, 'café'), (2, 'cafÃ©'), (3, 'globex');`

// F1: client_encoding LATIN1 (in the DSN, or ALTER DATABASE ... SET)
// reinterpreted the id's UTF-8 bytes: erasing "café" erased "cafÃ©", and
// the proof, reading under the same encoding, found nothing left.
func TestClientEncodingIsPinned(t *testing.T) {
	t.Parallel()
	victims := victimRows{"public.customers": "x.tenant_id = 'café'"}
	t.Run("in the DSN", func(t *testing.T) {
		t.Parallel()
		e := newSchemaEnv(t, cafeSchema)
		e.mustConfigure(t, map[string]any{"dsn": e.dsn + sep(e.dsn) + "client_encoding=LATIN1", "tables": []any{"customers"}})
		e.expectErased(t, "café", victims)
	})
	t.Run("ALTER DATABASE", func(t *testing.T) {
		t.Parallel()
		e := newSchemaEnv(t, cafeSchema)
		e.exec(t, `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET client_encoding = ''LATIN1''', current_database()); END $$`)
		e.mustConfigure(t, map[string]any{"tables": []any{"customers"}})
		e.expectErased(t, "café", victims)
	})
}

// F9: a search_path with a schema ahead of pg_catalog whose = compares text
// without regard to case made "= $1" take ACME's rows when erasing acme.
func TestAnOperatorAheadOfPgCatalogChangesNothing(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE TABLE customers (id int PRIMARY KEY, tenant_id text NOT NULL);
INSERT INTO customers VALUES (1, 'acme'), (2, 'ACME'), (3, 'globex');
CREATE SCHEMA ci;
CREATE FUNCTION ci.texteq(text, text) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT lower($1) OPERATOR(pg_catalog.=) lower($2)';
CREATE OPERATOR ci.= (LEFTARG = text, RIGHTARG = text, FUNCTION = ci.texteq, COMMUTATOR = OPERATOR(ci.=));
DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET search_path = ci, pg_catalog, public', current_database()); END $$;`)
	e.mustConfigure(t, map[string]any{"tables": []any{"customers"}})
	e.expectErased(t, "acme", victimRows{"public.customers": "x.tenant_id OPERATOR(pg_catalog.=) 'acme'"})
}

// F5: an AFTER DELETE trigger copied the tenant's row into a table of
// another schema; the proof looked only in the schemas of the listed
// tables and said nothing was left.
func TestTheProofLooksInEverySchemaOfTheDatabase(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE SCHEMA audit;
CREATE TABLE audit.deleted_customers (id int, tenant_id text, email text);
CREATE TABLE customers (id int PRIMARY KEY, tenant_id text NOT NULL, email text);
CREATE FUNCTION audit_del() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO audit.deleted_customers (id, tenant_id, email) VALUES (OLD.id, OLD.tenant_id, OLD.email); RETURN OLD; END $$;
CREATE TRIGGER customers_audit AFTER DELETE ON customers FOR EACH ROW EXECUTE FUNCTION audit_del();
INSERT INTO customers VALUES (1, 'acme', 'a@acme.test'), (2, 'globex', 'g@globex.test');`)
	e.mustConfigure(t, map[string]any{"tables": []any{"customers"}})
	resp, err := e.delete(t, "acme")
	require.NoError(t, err)
	require.EqualValues(t, 1, resp.DeletedCount)
	v := e.verify(t, "acme")
	require.EqualValues(t, 1, v.Left(), "the audit copy is the tenant's row, left: %+v", v.Checks)

	// Kept on purpose, it is reported as kept, not left.
	e.mustConfigure(t, map[string]any{"tables": []any{"customers"}, "ignore_tables": []any{"audit.deleted_customers"}})
	v = e.verify(t, "acme")
	require.Zero(t, v.Left(), "%+v", v.Checks)
}

// F7: char(n) ignores trailing blanks, varchar does not: with both kinds
// of tenant column in one deleter, "acme " is another tenant in one table
// and tenant "acme" in the other, and erasing acme took acme 's invoice.
// Refused where the tenant id format allows an id ending in a blank.
func TestCharAndVarcharTenantColumnsInOneDeleterAreRefused(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE TABLE accounts (id int PRIMARY KEY, tenant_id varchar(20) NOT NULL);
CREATE TABLE legacy_invoices (id int PRIMARY KEY, tenant_id char(10) NOT NULL);
INSERT INTO accounts VALUES (1, 'acme'), (2, 'acme ');
INSERT INTO legacy_invoices VALUES (10, 'acme'), (11, 'acme ');`)
	_, err := e.configure(t, map[string]any{"tables": []any{"legacy_invoices", "accounts"}})
	require.Error(t, err)
	require.Contains(t, err.Error(), "trailing blanks")
	require.Contains(t, err.Error(), "public.legacy_invoices")
}

// F8: a statement-level trigger that refuses every delete (an append-only
// ledger) stopped the erasure half way, after the tables before it. A
// rehearsal of one row of every table, rolled back, finds it first.
func TestATriggerThatRefusesDeletesIsFoundBeforeAnythingIsDeleted(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE TABLE sessions (id int PRIMARY KEY, tenant_id text NOT NULL);
CREATE TABLE ledger (id int PRIMARY KEY, tenant_id text NOT NULL, amount int);
CREATE FUNCTION forbid() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'ledger is append-only'; END $$;
CREATE TRIGGER ledger_append_only BEFORE DELETE ON ledger FOR EACH STATEMENT EXECUTE FUNCTION forbid();
INSERT INTO sessions VALUES (1, 'acme'), (2, 'globex'), (3, 'acme');
INSERT INTO ledger VALUES (10, 'acme', 5), (11, 'globex', 7);`)
	e.mustConfigure(t, map[string]any{"tables": []any{"sessions", "ledger"}})
	// Only Delete rehearses (Count and Plan run no hook): Count still counts.
	before := e.snapshot(t)
	_, err := e.delete(t, "acme")
	require.Error(t, err)
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err), "%v", err)
	for _, f := range []string{"refused before deleting anything", "public.ledger", "append-only", "public.ledger.ledger_append_only"} {
		require.Contains(t, err.Error(), f)
	}
	deleted, _ := sdk.DeletedBefore(err)
	require.Zero(t, deleted)
	require.Equal(t, before, e.snapshot(t), "nothing changed")
}

func sep(dsn string) string {
	for _, c := range dsn {
		if c == '?' {
			return "&"
		}
	}
	return "?"
}
