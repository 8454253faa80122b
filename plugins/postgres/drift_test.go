package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/sdk"
)

// driftSchema: accounts and their notes are listed; audit_log has the
// tenant column, note_reactions hangs off notes and reaction_votes off
// note_reactions (a path through an unlisted table).
const driftSchema = `
CREATE TABLE accounts (id int PRIMARY KEY, tenant_id text NOT NULL);
CREATE TABLE notes (id int PRIMARY KEY, tenant_id text NOT NULL, account_id int REFERENCES accounts (id));
CREATE TABLE audit_log (id int PRIMARY KEY, tenant_id text, what text);
CREATE TABLE note_reactions (id int PRIMARY KEY, note_id int REFERENCES notes (id));
CREATE TABLE reaction_votes (id int PRIMARY KEY, reaction_id int REFERENCES note_reactions (id));
CREATE TABLE countries (code text PRIMARY KEY);
INSERT INTO accounts VALUES (1, 'a'), (2, 'b');
INSERT INTO notes VALUES (1, 'a', 1), (2, 'b', 2), (3, 'a', 1);
INSERT INTO audit_log VALUES (1, 'a', 'x'), (2, 'b', 'y');
`

func TestDriftGateNamesUnlistedTablesAtConfigure(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, driftSchema)
	_, err := e.configure(t, map[string]any{"tables": []any{"notes", "accounts"}})
	require.ErrorIs(t, err, sdk.ErrInvalidConfig)
	var se *sdk.Error
	require.ErrorAs(t, err, &se)
	var problems []string
	for _, f := range se.Fields {
		require.Equal(t, "tables", f.Field)
		problems = append(problems, f.Problem)
	}
	require.Len(t, problems, 3, "%q", problems)
	require.Contains(t, problems[0], `public.audit_log is not in tables but has the tenant column "tenant_id"`)
	require.Contains(t, problems[1], "public.note_reactions is not in tables but references public.notes (note_reactions_note_id_fkey)")
	require.Contains(t, problems[2], "public.reaction_votes is not in tables but references public.note_reactions (reaction_votes_reaction_id_fkey), which is not listed either")
	require.NotContains(t, err.Error(), "countries", "a lookup table referenced by nobody is no drift")

	// Ignoring note_reactions also stops the path through it.
	e.mustConfigure(t, map[string]any{"tables": []any{"notes", "accounts"}, "ignore_tables": []any{"audit_log", "note_reactions"}})
	p := e.mustPlan(t, "a")
	require.Equal(t, []string{"public.audit_log is not deleted (ignore_tables)", "public.note_reactions is not deleted (ignore_tables)"}, p.Notes)
	// Listing them works as well.
	e.mustConfigure(t, map[string]any{"tables": []any{"reaction_votes", "note_reactions", "notes", "accounts"}, "ignore_tables": []any{"audit_log"}})

	// Ignoring a table changes the fingerprint: it is a decision about what
	// is deleted.
	e.mustConfigure(t, map[string]any{"tables": []any{"reaction_votes", "note_reactions", "notes", "accounts", "audit_log"}})
	all := e.mustPlan(t, "a").Fingerprint
	e.mustConfigure(t, map[string]any{"tables": []any{"reaction_votes", "note_reactions", "notes", "accounts"}, "ignore_tables": []any{"audit_log"}})
	require.NotEqual(t, all, e.mustPlan(t, "a").Fingerprint)
}

func TestIgnoreTablesErrors(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, driftSchema+`
CREATE TABLE parts (id int, tenant_id text) PARTITION BY LIST (id);
CREATE TABLE parts_1 PARTITION OF parts FOR VALUES IN (1);`)
	ok := []any{"audit_log", "note_reactions", "reaction_votes", "parts"}
	for name, tc := range map[string]struct {
		ignore []any
		field  string
		frag   string
	}{
		"unknown":   {append([]any{"nope"}, ok...), "ignore_tables[0]", `no table "nope"`},
		"twice":     {append(ok, "public.audit_log"), "ignore_tables[4]", "listed twice"},
		"partition": {append(ok, "parts_1"), "ignore_tables[4]", "is part of public.parts: ignore public.parts"},
		"listed":    {append(ok, "notes"), "tables[0]", "in both tables and ignore_tables"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := e.configure(t, map[string]any{"tables": []any{"notes", "accounts"}, "ignore_tables": tc.ignore})
			require.ErrorIs(t, err, sdk.ErrInvalidConfig)
			var se *sdk.Error
			require.ErrorAs(t, err, &se)
			require.Len(t, se.Fields, 1, "%v", err)
			require.Equal(t, tc.field, se.Fields[0].Field)
			require.Contains(t, se.Fields[0].Problem, tc.frag)
		})
	}
	e.mustConfigure(t, map[string]any{"tables": []any{"notes", "accounts"}, "ignore_tables": ok})
}

// A table added after Configure makes Plan, Count and Delete fail closed
// naming it, with nothing deleted, until the config says what it is.
func TestDriftAfterConfigureFailsClosed(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, driftSchema)
	e.mustConfigure(t, map[string]any{"tables": []any{"notes", "accounts"}, "ignore_tables": []any{"audit_log", "note_reactions"}})
	fp := e.mustPlan(t, "a").Fingerprint
	e.exec(t, `CREATE TABLE invoices (id int PRIMARY KEY, tenant_id text NOT NULL); INSERT INTO invoices VALUES (1, 'a'), (2, 'b')`)

	_, err := e.plan(t, "a")
	require.ErrorIs(t, err, sdk.ErrInvalidConfig)
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err))
	require.Contains(t, err.Error(), "the schema changed since the deleter was configured")
	require.Contains(t, err.Error(), `public.invoices is not in tables but has the tenant column "tenant_id"`)
	e.expectRefused(t, "a", "public.invoices", "ignore_tables")

	// A key from a new table into a listed one: the same.
	e2 := newSchemaEnv(t, driftSchema)
	e2.mustConfigure(t, map[string]any{"tables": []any{"notes", "accounts"}, "ignore_tables": []any{"audit_log", "note_reactions"}})
	e2.exec(t, `CREATE TABLE account_logins (id int PRIMARY KEY, account_id int REFERENCES accounts (id)); INSERT INTO account_logins VALUES (1, 2)`)
	e2.expectRefused(t, "a", "public.account_logins is not in tables but references public.accounts (account_logins_account_id_fkey)")

	// Listing the new table: planned and erased, with a new fingerprint.
	e.mustConfigure(t, map[string]any{"tables": []any{"invoices", "notes", "accounts"}, "ignore_tables": []any{"audit_log", "note_reactions"}})
	p := e.mustPlan(t, "a")
	require.NotEqual(t, fp, p.Fingerprint)
	require.Equal(t, sdk.PlanStep{Target: "public.invoices", Via: "tenant column tenant_id", Expected: 1}, p.Steps[0])
	e.expectErased(t, "a", victimRows{
		"public.invoices": "x.tenant_id = 'a'",
		"public.notes":    "x.tenant_id = 'a'",
		"public.accounts": "x.tenant_id = 'a'",
	})
}

// In discover mode ignore_tables leaves a table out: its rows stay.
func TestDiscoverIgnoreTablesLeavesTheTableOut(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, driftSchema)
	e.mustConfigure(t, map[string]any{"discover": true, "ignore_tables": []any{"audit_log"}})
	p := e.mustPlan(t, "a")
	for _, s := range p.Steps {
		require.NotEqual(t, "public.audit_log", s.Target)
	}
	require.Contains(t, p.Notes, "public.audit_log is not deleted (ignore_tables)")
	e.expectErased(t, "a", victimRows{
		"public.notes":    "x.tenant_id = 'a'",
		"public.accounts": "x.tenant_id = 'a'",
	})
	require.Len(t, e.rowsWhere(t, "public.audit_log", "x.tenant_id = 'a'"), 1, "the ignored table keeps its rows")
}

// The tenant column is looked for in the schemas the list deletes from
// (lifecycled's own state store may share the database); a key into the
// deleted tables counts from any schema.
func TestDriftGateLooksForTheTenantColumnInTheListsSchemas(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE SCHEMA lifecycle;
CREATE TABLE lifecycle.deletion_jobs (id int PRIMARY KEY, tenant_id text NOT NULL);
CREATE SCHEMA crm;
CREATE TABLE crm.accounts (id int PRIMARY KEY, tenant_id text NOT NULL);
CREATE TABLE crm.leads (id int PRIMARY KEY, tenant_id text NOT NULL);
CREATE SCHEMA reporting;
CREATE TABLE reporting.account_stats (account_id int REFERENCES crm.accounts (id), visits int);
INSERT INTO lifecycle.deletion_jobs VALUES (1, 'a');
INSERT INTO crm.accounts VALUES (1, 'a'), (2, 'b');
INSERT INTO crm.leads VALUES (1, 'a');
`)
	_, err := e.configure(t, map[string]any{"tables": []any{"crm.accounts"}})
	require.ErrorIs(t, err, sdk.ErrInvalidConfig)
	require.Contains(t, err.Error(), `crm.leads is not in tables but has the tenant column "tenant_id"`)
	require.Contains(t, err.Error(), "reporting.account_stats is not in tables but references crm.accounts (account_stats_account_id_fkey)")
	require.NotContains(t, err.Error(), "lifecycle.deletion_jobs", "another schema's tenant column is not this list's business")
	e.mustConfigure(t, map[string]any{"tables": []any{"crm.leads", "crm.accounts"}, "ignore_tables": []any{"reporting.account_stats"}})
	e.expectErased(t, "a", victimRows{"crm.accounts": "x.tenant_id = 'a'", "crm.leads": "x.tenant_id = 'a'"})
	require.Len(t, e.rowsWhere(t, "lifecycle.deletion_jobs", "true"), 1)
}

// TestDriftGateSeesMaterializedViews: a materialized view with the tenant
// column keeps a copy of the tenant's rows that no delete reaches (found by
// an outside attack: the job was COMPLETED and verified while the view
// still held the tenant's notes). It fails the gate until it is in
// ignore_tables, the operator's statement that it is refreshed (or holds
// nothing of a tenant).
func TestDriftGateSeesMaterializedViews(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE TABLE orders (id int PRIMARY KEY, tenant_id text NOT NULL, note text);
INSERT INTO orders VALUES (1, 'a', 'n1'), (2, 'b', 'n2');
CREATE MATERIALIZED VIEW order_summary AS SELECT tenant_id, string_agg(note, ',') AS notes FROM orders GROUP BY tenant_id;
CREATE MATERIALIZED VIEW order_totals AS SELECT count(*) AS n FROM orders;
`)
	_, err := e.configure(t, map[string]any{"tables": []any{"orders"}})
	require.ErrorIs(t, err, sdk.ErrInvalidConfig)
	require.Contains(t, err.Error(), `public.order_summary is not in tables but is a materialized view with the tenant column "tenant_id"`)
	require.NotContains(t, err.Error(), "order_totals", "a view without the tenant column holds no tenant's rows")
	e.mustConfigure(t, map[string]any{"tables": []any{"orders"}, "ignore_tables": []any{"order_summary"}})
	e.mustConfigure(t, map[string]any{"tables": []any{"orders"}, "ignore_tables": []any{"public.order_summary"}})
}

// TestDiscoverSeesMaterializedViews: with discover = true a materialized
// view holding the tenant column was skipped in silence, while the same
// view failed the gate of an explicit tables list (found by an outside
// attack). Discover now fails closed on it too, naming it, until
// ignore_tables records it, and the plan names it then.
func TestDiscoverSeesMaterializedViews(t *testing.T) {
	t.Parallel()
	const schema = `
CREATE TABLE orders (id int PRIMARY KEY, tenant_id text NOT NULL, note text);
INSERT INTO orders VALUES (1, 'a', 'n1'), (2, 'b', 'n2');
CREATE MATERIALIZED VIEW order_summary AS SELECT tenant_id, string_agg(note, ',') AS notes FROM orders GROUP BY tenant_id;
CREATE MATERIALIZED VIEW order_totals AS SELECT count(*) AS n FROM orders;
CREATE SCHEMA elsewhere;
CREATE MATERIALIZED VIEW elsewhere.copy AS SELECT * FROM orders;
`
	e := newSchemaEnv(t, schema)
	_, err := e.configure(t, map[string]any{"discover": true})
	require.ErrorIs(t, err, sdk.ErrInvalidConfig)
	var se *sdk.Error
	require.ErrorAs(t, err, &se)
	require.Len(t, se.Fields, 1, "%v", err)
	require.Equal(t, "discover", se.Fields[0].Field)
	require.Contains(t, se.Fields[0].Problem, `public.order_summary is in the discovered schemas but is a materialized view with the tenant column "tenant_id"`)
	require.NotContains(t, err.Error(), "order_totals", "a view without the tenant column holds no tenant's rows")
	require.NotContains(t, err.Error(), "elsewhere.copy", "a schema discover does not read")

	e.mustConfigure(t, map[string]any{"discover": true, "ignore_tables": []any{"order_summary"}})
	p := e.mustPlan(t, "a")
	require.Contains(t, p.Notes, "public.order_summary is a materialized view, not deleted (ignore_tables): refresh it after erasures, or it keeps the tenant's rows")
	withView := p.Fingerprint

	// A view created after Configure: Plan, Count and Delete refuse, nothing deleted.
	e.exec(t, `CREATE MATERIALIZED VIEW order_notes AS SELECT tenant_id, note FROM orders`)
	_, err = e.plan(t, "a")
	require.ErrorIs(t, err, sdk.ErrInvalidConfig)
	require.Contains(t, err.Error(), "public.order_notes is in the discovered schemas but is a materialized view")
	e.expectRefused(t, "a", "public.order_notes", "ignore_tables")

	// Ignoring a view is a decision about what is deleted: in the fingerprint.
	e.mustConfigure(t, map[string]any{"discover": true, "ignore_tables": []any{"order_summary", "order_notes"}})
	require.NotEqual(t, withView, e.mustPlan(t, "a").Fingerprint)
	// The proof looks in every schema: elsewhere.copy holds a's row, which
	// no delete reaches; left until it is kept on purpose.
	v := e.verify(t, "a")
	require.Contains(t, v.Checks, sdk.ProofCheck{Kind: sdk.ProofTenantItems, Target: "elsewhere.copy.tenant_id", Found: 1})
	e.mustConfigure(t, map[string]any{"discover": true, "ignore_tables": []any{"order_summary", "order_notes", "elsewhere.copy"}})
	e.expectErased(t, "a", victimRows{"public.orders": "x.tenant_id = 'a'"})

	// tenant_columns names a view's tenant column as it names a table's.
	e.exec(t, `CREATE MATERIALIZED VIEW org_view AS SELECT tenant_id AS org FROM orders`)
	ignore := []any{"order_summary", "order_notes"}
	e.mustConfigure(t, map[string]any{"discover": true, "ignore_tables": ignore})
	_, err = e.configure(t, map[string]any{"discover": true, "ignore_tables": ignore, "tenant_columns": map[string]any{"org_view": "org"}})
	require.ErrorIs(t, err, sdk.ErrInvalidConfig)
	require.Contains(t, err.Error(), `public.org_view is in the discovered schemas but is a materialized view with the tenant column "org"`)
}
