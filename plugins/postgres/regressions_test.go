package main

// Regression tests from an outside attack on the erasure invariant (delete
// all of this tenant, nothing of any other, count what went, verify only
// what is true). Each failed against the first version of the model.

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

// uniqueRole returns a cluster-wide unique role name, dropped at cleanup.
func (e *schemaEnv) role(t *testing.T, prefix, options string) string {
	t.Helper()
	name := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano()%1_000_000_000)
	e.exec(t, `CREATE ROLE `+name+` `+options)
	t.Cleanup(func() {
		ctx := testsvc.Context(t, 2*time.Minute)
		_, _ = e.pool.Exec(ctx, `REASSIGN OWNED BY `+name+` TO postgres`)
		_, _ = e.pool.Exec(ctx, `DROP OWNED BY `+name)
		_, _ = e.pool.Exec(ctx, `DROP ROLE `+name)
	})
	return name
}

// configureAs configures the deleter to connect as role.
func (e *schemaEnv) configureAs(t *testing.T, role string, cfg map[string]any) error {
	t.Helper()
	u, err := url.Parse(e.dsn)
	require.NoError(t, err)
	u.User = url.User(role)
	full := map[string]any{"dsn": u.String()}
	for k, v := range cfg {
		full[k] = v
	}
	_, err = e.d.Configure(testsvc.Context(t, time.Minute), &sdk.ConfigureRequest{Name: "postgres:test", Config: full, TenantIDFormat: anyTenantID})
	return err
}

func (e *schemaEnv) count1(t *testing.T, sql string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, e.pool.QueryRow(testsvc.Context(t, time.Minute), sql).Scan(&n), sql)
	return n
}

// 1. A foreign key from a text/varchar column to a char(n) key compares as
// char(n) does (trailing blanks ignored), but the preflight's
// "col IN (SELECT key ...)" resolves to text = text and does not see the
// reference: another tenant's row referencing the erased tenant's row
// through ON DELETE CASCADE is deleted by the cascade.
func TestAttackCharKeyReferencedFromTextColumnEvadesPreflight(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{"text", "varchar(8)"} {
		t.Run(typ, func(t *testing.T) { charKeyInSet(t, typ) })
	}
}

func charKeyInSet(t *testing.T, typ string) {
	e := newSchemaEnv(t, `
CREATE TABLE projects (code char(8) PRIMARY KEY, tenant_id text NOT NULL);
CREATE TABLE tasks (id int PRIMARY KEY, tenant_id text NOT NULL,
	project_code `+typ+` REFERENCES projects (code) ON DELETE CASCADE);
INSERT INTO projects VALUES ('P1', 'a'), ('P2', 'b');
INSERT INTO tasks VALUES (1, 'a', 'P1'), (2, 'b', 'P2'),
	(3, 'b', 'P1 ');  -- tenant b's task, referencing tenant a's project P1 (trailing blank)
`)
	e.mustConfigure(t, map[string]any{"tables": []any{"tasks", "projects"}})
	t.Cleanup(func() {
		t.Logf("tenant b's tasks after the test: %v", e.rowsWhere(t, "public.tasks", "x.tenant_id = 'b'"))
	})
	// Expected: refused (another tenant's row references a's row through
	// a cascading key), nothing changed.
	e.expectRefused(t, "a", "tasks")
}

// Same, with tasks outside the set (a cascade target): the tenant b row
// must never be deleted by a's erasure.
func TestAttackCharKeyCascadeTargetDeletesOtherTenant(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE TABLE projects (code char(8) PRIMARY KEY, tenant_id text NOT NULL);
CREATE TABLE tasks (id int PRIMARY KEY, tenant_id text NOT NULL,
	project_code text REFERENCES projects (code) ON DELETE CASCADE);
INSERT INTO projects VALUES ('P1', 'a'), ('P2', 'b');
INSERT INTO tasks VALUES (1, 'a', 'P1'), (2, 'b', 'P2'), (3, 'b', 'P1 ');
`)
	e.mustConfigure(t, map[string]any{"tables": []any{"projects"}})
	before := e.count1(t, `SELECT count(*) FROM tasks WHERE tenant_id = 'b'`)
	c, cerr := e.count(t, "a")
	resp, err := e.delete(t, "a")
	after := e.count1(t, `SELECT count(*) FROM tasks WHERE tenant_id = 'b'`)
	t.Logf("count=%+v err=%v; delete=%+v err=%v; b's tasks %d -> %d", c, cerr, resp, err, before, after)
	require.Equal(t, before, after, "tenant b's tasks must not change when erasing a")
}

// 2. Row-level security on a table outside the set (not checked at
// Configure) hides other tenants' rows from the preflight, while the
// cascade (run by the RI trigger as the owner, ignoring RLS) deletes them.
// The deleter connects as the owner, as docs/plugins.md advises.
func TestAttackForcedRLSOnReferencingTableBlindsPreflight(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `SELECT 1`)
	owner := e.role(t, "lcd_owner", "LOGIN")
	e.exec(t, `GRANT CREATE ON SCHEMA public TO `+owner)
	e.exec(t, `SET ROLE `+owner+`;
CREATE TABLE projects (id int PRIMARY KEY, tenant_id text NOT NULL);
CREATE TABLE notes (id int PRIMARY KEY, tenant_id text NOT NULL, project_id int REFERENCES projects ON DELETE CASCADE);
CREATE TABLE attachments (id int PRIMARY KEY, project_id int REFERENCES projects ON DELETE CASCADE);
ALTER TABLE notes ENABLE ROW LEVEL SECURITY; ALTER TABLE notes FORCE ROW LEVEL SECURITY;
ALTER TABLE attachments ENABLE ROW LEVEL SECURITY; ALTER TABLE attachments FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON notes USING (tenant_id = current_setting('app.tenant_id', true));
CREATE POLICY tenant_isolation ON attachments USING (current_setting('app.tenant_id', true) IS NOT NULL);
INSERT INTO projects VALUES (1, 'a'), (2, 'b');
RESET ROLE;`)
	// Rows inserted by the superuser (RLS does not apply to it).
	e.exec(t, `INSERT INTO notes VALUES (1, 'a', 1), (2, 'b', 1), (3, 'b', 2);
INSERT INTO attachments VALUES (1, 1), (2, 2)`)
	// Refused at Configure: the preflight could not see what the cascade
	// would reach.
	// attachments references projects without a tenant column: ignored on
	// purpose, so that the preflight (not the drift gate) is what is tested.
	err := e.configureAs(t, owner, map[string]any{"tables": []any{"projects"}, "ignore_tables": []any{"attachments"}})
	require.ErrorIs(t, err, sdk.ErrInvalidConfig)
	require.Contains(t, err.Error(), "row-level security")
	require.Contains(t, err.Error(), "public.notes")
	// A role that bypasses it sees b's note and refuses the erasure.
	bypass := e.role(t, "lcd_bypass", "LOGIN BYPASSRLS")
	e.exec(t, `GRANT SELECT, DELETE ON projects, notes, attachments TO `+bypass)
	require.NoError(t, e.configureAs(t, bypass, map[string]any{"tables": []any{"projects"}, "ignore_tables": []any{"attachments"}}))
	e.expectRefused(t, "a", "public.notes", "public.attachments")
	snapNotes := e.rowsWhere(t, "public.notes", "x.tenant_id = 'b'")
	snapAtt := e.rowsWhere(t, "public.attachments", "true")
	resp, err := e.delete(t, "a")
	t.Logf("delete(a) = %+v, %v", resp, err)
	t.Logf("b's notes before %v after %v; attachments before %v after %v", snapNotes, e.rowsWhere(t, "public.notes", "x.tenant_id = 'b'"), snapAtt, e.rowsWhere(t, "public.attachments", "true"))
	require.Equal(t, snapNotes, e.rowsWhere(t, "public.notes", "x.tenant_id = 'b'"), "tenant b's notes must stay")
	require.Equal(t, snapAtt, e.rowsWhere(t, "public.attachments", "true"), "attachments (not deleted by this deleter) must stay or the erasure be refused")
}

// 3. A role that is a NOINHERIT member of the tables' owner: pg_has_role(..,
// 'MEMBER') says owner, so Configure accepts the table, but RLS applies to
// the role (ownership needs inherited privileges). Count sees nothing,
// Delete deletes nothing, and the daemon would call the job verified.
func TestAttackNoInheritMemberOfOwnerIsBlindToRLS(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `SELECT 1`)
	owner := e.role(t, "lcd_app", "NOLOGIN")
	deleter := e.role(t, "lcd_eraser", "LOGIN NOINHERIT")
	e.exec(t, `GRANT CREATE ON SCHEMA public TO `+owner)
	e.exec(t, `SET ROLE `+owner+`;
CREATE TABLE notes (id int PRIMARY KEY, tenant_id text NOT NULL);
ALTER TABLE notes ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON notes USING (tenant_id = current_setting('app.tenant_id', true));
RESET ROLE;
INSERT INTO notes SELECT g, CASE WHEN g % 2 = 0 THEN 'a' ELSE 'b' END FROM generate_series(1, 10) g;`)
	e.exec(t, `GRANT `+owner+` TO `+deleter)
	e.exec(t, `GRANT SELECT, DELETE ON notes TO `+deleter)
	err := e.configureAs(t, deleter, map[string]any{"tables": []any{"notes"}})
	if err != nil {
		t.Logf("Configure refused (good): %v", err)
		return
	}
	c, err := e.count(t, "a")
	require.NoError(t, err)
	resp, err := e.delete(t, "a")
	require.NoError(t, err)
	after, err := e.count(t, "a")
	require.NoError(t, err)
	left := e.count1(t, `SELECT count(*) FROM notes WHERE tenant_id = 'a'`)
	t.Logf("count=%d deleted=%d verify-count=%d rows of a left=%d", c.Count, resp.DeletedCount, after.Count, left)
	require.False(t, after.Count == 0 && left > 0, "the verification count says 0 while %d rows of a remain", left)
}

// 4. Mixed citext and text tenant columns in one deleter: "acme" and
// "ACME" are two tenants in the text table, but erasing "acme" deletes
// ACME's rows of the citext table (and "ACME" cannot be erased at all).
func TestAttackMixedCitextAndTextColumnsEraseAnotherTenant(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE EXTENSION IF NOT EXISTS citext;
CREATE TABLE accounts (id int PRIMARY KEY, tenant_id text NOT NULL);
CREATE TABLE contacts (id int PRIMARY KEY, tenant_id citext NOT NULL, email text);
INSERT INTO accounts VALUES (1, 'acme'), (2, 'ACME');
INSERT INTO contacts VALUES (1, 'acme', 'x@acme'), (2, 'ACME', 'y@ACME');`)
	_, err := e.configure(t, map[string]any{"tables": []any{"contacts", "accounts"}})
	require.ErrorIs(t, err, sdk.ErrInvalidConfig)
	require.Contains(t, err.Error(), "case-insensitively")
}

// 5. tenant_columns keyed "crm.accounts" (schema crm, table accounts) also
// applies to a table literally named "crm.accounts" in public.
func TestAttackTenantColumnsKeyWithDotHitsPublicTableNamedWithDot(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE SCHEMA crm;
CREATE TABLE crm.accounts (id int PRIMARY KEY, name text);
CREATE TABLE crm.deals (id int PRIMARY KEY, account_id int NOT NULL REFERENCES crm.accounts (id));
CREATE TABLE public."crm.accounts" (id int PRIMARY KEY, account_id int NOT NULL, payload text); -- legacy import, keyed by its own id
INSERT INTO crm.accounts VALUES (7, 'seven'), (3, 'three');
INSERT INTO crm.deals VALUES (1, 7), (2, 3);
INSERT INTO public."crm.accounts" VALUES (7, 3, 'belongs to account 3'), (8, 7, 'belongs to account 7');`)
	e.mustConfigure(t, map[string]any{"discover": true, "schemas": []any{"crm", "public"}, "tenant_column": "account_id",
		"tenant_columns": map[string]any{"crm.accounts": "id"}})
	before := e.rowsWhere(t, "public.crm.accounts", "x.account_id = 3")
	c, err := e.count(t, "7")
	t.Logf("count(7) = %+v, %v", c, err)
	resp, err := e.delete(t, "7")
	t.Logf("delete(7) = %+v, %v", resp, err)
	require.Equal(t, before, e.rowsWhere(t, "public.crm.accounts", "x.account_id = 3"), "account 3's rows must stay")
}

// 6. Multiple inheritance: a child of two listed parents is counted under
// both, so Count reports its rows twice (Delete once).
func TestAttackMultipleInheritanceCountedTwice(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE TABLE billable (id int, tenant_id text NOT NULL);
CREATE TABLE auditable (id int, tenant_id text NOT NULL);
CREATE TABLE invoices (amount int) INHERITS (billable, auditable);
INSERT INTO billable VALUES (1, 'a'), (2, 'b');
INSERT INTO auditable VALUES (3, 'a');
INSERT INTO invoices VALUES (4, 'a', 10), (5, 'a', 20), (6, 'b', 30);`)
	_, err := e.configure(t, map[string]any{"tables": []any{"billable", "auditable"}})
	require.ErrorIs(t, err, sdk.ErrInvalidConfig)
	require.Contains(t, err.Error(), "multiple inheritance")
}

// 7. Two tables that reference each other with ON DELETE CASCADE (a
// document and its current version): with a small batch, a batch of one
// table removes rows of the same table through the cycle, and those rows
// are not counted.
func TestAttackMutualCascadeUndercountsAtSmallBatch(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE TABLE documents (id int PRIMARY KEY, tenant_id text NOT NULL, current_version int);
CREATE TABLE versions (id int PRIMARY KEY, tenant_id text NOT NULL, document_id int NOT NULL REFERENCES documents ON DELETE CASCADE);
ALTER TABLE documents ADD FOREIGN KEY (current_version) REFERENCES versions ON DELETE CASCADE;
CREATE INDEX ON versions (document_id); CREATE INDEX ON documents (current_version);
INSERT INTO documents VALUES (1, 'a', NULL), (2, 'a', NULL), (3, 'b', NULL);
INSERT INTO versions VALUES (1, 'a', 1), (2, 'a', 1), (3, 'a', 1), (4, 'a', 2), (5, 'a', 2), (6, 'b', 3);
UPDATE documents SET current_version = CASE id WHEN 1 THEN 1 WHEN 2 THEN 4 ELSE 6 END;`)
	// Child first as the docs ask (versions, then documents); both keys
	// cascade, so the cycle is broken at them.
	e.mustConfigure(t, map[string]any{"tables": []any{"versions", "documents"}, "batch_size": 1})
	e.expectErased(t, "a", victimRows{"public.documents": "x.tenant_id = 'a'", "public.versions": "x.tenant_id = 'a'"})
}

// 8. A cycle of DEFERRABLE keys between a tenant table and a table without
// the tenant column (an account and its memberships, the account naming its
// owner membership). With discover the cycle's tables are deleted in name
// order inside one transaction: the accounts first, after which the
// memberships can no longer be found through them, so the commit fails
// every time. docs/plugins.md says deferrable cycles are supported.
func TestAttackDeferrableCycleWithDependentTableNeverErasable(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE TABLE accounts (id int PRIMARY KEY, tenant_id text NOT NULL, owner_membership int);
CREATE TABLE memberships (id int PRIMARY KEY, account_id int NOT NULL REFERENCES accounts DEFERRABLE INITIALLY DEFERRED, role text);
ALTER TABLE accounts ADD FOREIGN KEY (owner_membership) REFERENCES memberships DEFERRABLE INITIALLY DEFERRED;
CREATE INDEX ON memberships (account_id); CREATE INDEX ON accounts (owner_membership); CREATE INDEX ON accounts (tenant_id);
BEGIN;
INSERT INTO accounts VALUES (1, 'a', 10), (2, 'b', 20);
INSERT INTO memberships VALUES (10, 1, 'owner'), (11, 1, 'member'), (20, 2, 'owner');
COMMIT;`)
	e.mustConfigure(t, map[string]any{"discover": true})
	e.expectErased(t, "a", victimRows{"public.accounts": "x.tenant_id = 'a'", "public.memberships": "x.account_id = 1"})
}

// 9. A cascading key declared on one partition only of a partitioned table
// outside the set: Count counts the tenant's rows of every partition that
// hold a matching value, the cascade deletes only those of the partition
// with the key.
func TestAttackCascadeKeyOnOnePartitionOnly(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE TABLE projects (id int PRIMARY KEY, tenant_id text NOT NULL);
CREATE TABLE events (id int NOT NULL, tenant_id text NOT NULL, project_id int) PARTITION BY RANGE (id);
CREATE TABLE events_recent PARTITION OF events FOR VALUES FROM (1) TO (100);
CREATE TABLE events_archive PARTITION OF events FOR VALUES FROM (100) TO (200);
ALTER TABLE events_recent ADD FOREIGN KEY (project_id) REFERENCES projects ON DELETE CASCADE;
INSERT INTO projects VALUES (1, 'a'), (2, 'b');
INSERT INTO events VALUES (1, 'a', 1), (2, 'b', 2), (150, 'a', 1), (151, 'b', 2);`)
	e.mustConfigure(t, map[string]any{"tables": []any{"projects"}})
	c, err := e.count(t, "a")
	require.NoError(t, err)
	resp, err := e.delete(t, "a")
	require.NoError(t, err)
	after, err := e.count(t, "a")
	require.NoError(t, err)
	t.Logf("Count = %+v; Delete = %+v; Count after = %+v", c, resp, after)
	require.Equal(t, c.Count, resp.DeletedCount, "Count before must match what Delete removed")
}

// 10. citext installed in its own schema (CREATE EXTENSION citext SCHEMA
// extensions, as Supabase and many hardening guides do) that is not on the
// deleter's search_path: "tenant_id = $1" then resolves to text = text and
// compares case-sensitively, while the application (whose search_path
// holds the extension) compares case-insensitively. The deleter refuses
// "ACME" as "the upper-case spelling of acme", but erasing "acme" leaves
// the rows 'Acme' and 'ACME' and the count afterwards says 0.
func TestAttackCitextOutsideSearchPathComparesCaseSensitively(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE SCHEMA extensions;
CREATE EXTENSION citext SCHEMA extensions;
CREATE TABLE contacts (id int PRIMARY KEY, tenant_id extensions.citext NOT NULL, email text);
INSERT INTO contacts VALUES (1, 'acme', 'a@x'), (2, 'Acme', 'b@x'), (3, 'ACME', 'c@x'), (4, 'other', 'd@x');`)
	// What the application sees (extension on its search_path):
	appView := e.count1(t, `SELECT count(*) FROM contacts WHERE tenant_id OPERATOR(extensions.=) 'acme'`)
	require.EqualValues(t, 3, appView)
	_, err := e.configure(t, map[string]any{"tables": []any{"contacts"}})
	require.ErrorIs(t, err, sdk.ErrInvalidConfig)
	require.Contains(t, err.Error(), "search_path")
}

// 11. A domain over a domain over citext, where the middle domain is
// named "text" (in another schema): the type check reads one level of
// domain and the name only, takes it for text, and accepts the upper-case
// spelling, which then erases the lower-case tenant's rows.
func TestAttackNestedDomainNamedTextHidesCitext(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE EXTENSION IF NOT EXISTS citext;
CREATE SCHEMA types;
CREATE DOMAIN types."text" AS citext;
CREATE DOMAIN tenant_key AS types."text";
CREATE TABLE contacts (id int PRIMARY KEY, tenant_id tenant_key NOT NULL);
INSERT INTO contacts VALUES (1, 'acme'), (2, 'ACME'), (3, 'other');`)
	e.mustConfigure(t, map[string]any{"tables": []any{"contacts"}})
	before := e.snapshot(t)
	_, err := e.delete(t, "ACME")
	require.Error(t, err, "upper case must be refused for a citext column")
	require.Equal(t, before, e.snapshot(t))
}

// 12. Rows without the tenant column that belong to the tenant through a
// text key referencing a char(n) key ('O1 ' references 'O1' for the
// database): the FK path "IN (SELECT ...)" does not see them, so Count
// misses them; with ON DELETE CASCADE they go uncounted with the parent,
// with NO ACTION the erasure fails on them.
func TestAttackDependentRowsThroughTextToCharKey(t *testing.T) {
	t.Parallel()
	for _, action := range []string{"ON DELETE CASCADE", "ON DELETE NO ACTION"} {
		t.Run(action, func(t *testing.T) {
			e := newSchemaEnv(t, `
CREATE TABLE orders (code char(10) PRIMARY KEY, tenant_id text NOT NULL);
CREATE TABLE order_lines (id int PRIMARY KEY, order_code text NOT NULL REFERENCES orders (code) `+action+`);
INSERT INTO orders VALUES ('O1', 'a'), ('O2', 'b');
INSERT INTO order_lines VALUES (1, 'O1'), (2, 'O1 '), (3, 'O2');`)
			e.mustConfigure(t, map[string]any{"discover": true})
			c, cerr := e.count(t, "a")
			resp, derr := e.delete(t, "a")
			removed := 5 - e.count1(t, `SELECT (SELECT count(*) FROM orders) + (SELECT count(*) FROM order_lines)`)
			t.Logf("Count = %+v %v; Delete = %+v %v; rows actually removed: %d", c, cerr, resp, derr, removed)
			require.NoError(t, derr)
			require.EqualValues(t, 3, removed, "order O1 and its lines 1 and 2")
			require.EqualValues(t, 3, c.Count, "Count")
			require.EqualValues(t, removed, resp.DeletedCount, "reported count")
		})
	}
}

// 13. A partition whose DETACH ... CONCURRENTLY was interrupted stays in
// pg_inherits (inhdetachpending) but queries on the parent no longer see
// it: Count (which reads the root) leaves its rows out, Delete (leaf by
// leaf) deletes them, so the reported count exceeds the count before.
func TestAttackDetachPendingPartitionCountVersusDelete(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE TABLE events (id int NOT NULL, tenant_id text NOT NULL) PARTITION BY RANGE (id);
CREATE TABLE events_new PARTITION OF events FOR VALUES FROM (100) TO (200);
CREATE TABLE events_old PARTITION OF events FOR VALUES FROM (1) TO (100);
INSERT INTO events VALUES (1, 'a'), (2, 'b'), (150, 'a'), (151, 'b');`)
	ctx := testsvc.Context(t, time.Minute)
	holder, err := e.pool.Acquire(ctx)
	require.NoError(t, err)
	_, err = holder.Exec(ctx, `BEGIN ISOLATION LEVEL REPEATABLE READ`)
	require.NoError(t, err)
	_, err = holder.Exec(ctx, `SELECT count(*) FROM events`)
	require.NoError(t, err)
	detacher, err := e.pool.Acquire(ctx)
	require.NoError(t, err)
	_, err = detacher.Exec(ctx, `SET statement_timeout = '1s'`)
	require.NoError(t, err)
	_, err = detacher.Exec(ctx, `ALTER TABLE events DETACH PARTITION events_old CONCURRENTLY`)
	require.Error(t, err, "the detach waits for the open snapshot and is cancelled")
	_, _ = detacher.Exec(ctx, `RESET statement_timeout`)
	detacher.Release()
	_, err = holder.Exec(ctx, `COMMIT`)
	require.NoError(t, err)
	holder.Release()
	require.EqualValues(t, 1, e.count1(t, `SELECT count(*) FROM pg_inherits WHERE inhdetachpending`))

	e.mustConfigure(t, map[string]any{"tables": []any{"events"}})
	c, err := e.count(t, "a")
	require.NoError(t, err)
	resp, err := e.delete(t, "a")
	require.NoError(t, err)
	t.Logf("Count = %+v; Delete = %+v", c, resp)
	require.Equal(t, c.Count, resp.DeletedCount, "Count and Delete must agree")
}

// A soft-delete trigger (BEFORE DELETE ... RETURN NULL) made Delete report
// 0 while the rows stayed. It is refused before anything is deleted; once
// acknowledged, the delete runs and the independent proof finds the rows
// it recorded still there, so Delete fails and nothing is verified.
func TestSoftDeleteTriggerIsRefusedAndOnceAcknowledgedCaughtByTheProof(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE TABLE docs (id int PRIMARY KEY, tenant_id text NOT NULL, deleted_at timestamptz);
CREATE FUNCTION soft_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN UPDATE docs SET deleted_at = now() WHERE id = OLD.id; RETURN NULL; END $$;
CREATE TRIGGER soft BEFORE DELETE ON docs FOR EACH ROW EXECUTE FUNCTION soft_delete();
INSERT INTO docs SELECT g, CASE WHEN g % 2 = 0 THEN 'a' ELSE 'b' END FROM generate_series(1, 10) g;`)
	_, err := e.configure(t, map[string]any{"tables": []any{"docs"}, "batch_size": 2})
	require.ErrorIs(t, err, sdk.ErrInvalidConfig)
	require.Contains(t, err.Error(), "public.docs.soft")

	e.mustConfigure(t, map[string]any{"tables": []any{"docs"}, "batch_size": 2, "acknowledged_hooks": []any{"public.docs.soft"}})
	_, err = e.delete(t, "a")
	require.Error(t, err)
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err), "%v", err)
	require.Contains(t, err.Error(), "5 of the 5 rows of public.docs recorded before the delete are still there")
	require.Contains(t, err.Error(), "public.docs.soft can keep rows")
	v := e.verify(t, "a")
	require.EqualValues(t, 5, v.Left(), "the catalogue re-read finds the rows too: %+v", v.Checks)
	require.Equal(t, []string{}, e.rowsWhere(t, "public.docs", "x.tenant_id = 'b' AND x.deleted_at IS NOT NULL"))
}
