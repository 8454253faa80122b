package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/sdk"
)

const postsAndComments = `
CREATE TABLE posts (id int PRIMARY KEY, tenant_id text NOT NULL);
CREATE TABLE comments (id int PRIMARY KEY, tenant_id text NOT NULL, post_id int REFERENCES posts (id) ON DELETE {action});
CREATE INDEX ON comments (post_id);
INSERT INTO posts SELECT g, CASE WHEN g <= 5 THEN 'a' ELSE 'b' END FROM generate_series(1, 10) g;
INSERT INTO comments SELECT g, CASE WHEN g <= 20 THEN 'a' ELSE 'b' END, CASE WHEN g <= 20 THEN 1 + g % 5 ELSE 6 + g % 5 END FROM generate_series(1, 40) g;
`

func TestCascadeOrSetNullIntoAnotherTenantIsRefused(t *testing.T) {
	t.Parallel()
	for _, action := range []string{"CASCADE", "SET NULL", "SET DEFAULT"} {
		for mode, cfg := range map[string]map[string]any{
			"tables":   {"tables": []any{"comments", "posts"}},
			"discover": {"discover": true},
		} {
			t.Run(action+"/"+mode, func(t *testing.T) {
				e := newSchemaEnv(t, withAction(postsAndComments, action))
				// Tenant B commented on tenant A's post 1.
				e.exec(t, `INSERT INTO comments VALUES (100, 'b', 1), (101, 'b', 2)`)
				e.mustConfigure(t, cfg)
				e.expectRefused(t, "a", "comments_post_id_fkey", "public.comments", "2 rows")
				// B's erasure is unaffected by A's rows.
				e.expectErased(t, "b", victimRows{
					"public.posts":    "x.tenant_id = 'b'",
					"public.comments": "x.tenant_id = 'b'",
				})
			})
		}
	}
}

// A plain key from another tenant's row is checked before anything is
// deleted: leaving it to the database stopped the erasure half way, with
// the child table already erased (the erasure invariant: refused with
// nothing changed, or the tenant gone). The refusal names the key and
// counts the rows.
func TestPlainKeyFromAnotherTenantIsRefusedBeforeAnythingIsDeleted(t *testing.T) {
	t.Parallel()
	for _, action := range []string{"NO ACTION", "RESTRICT"} {
		t.Run(action, func(t *testing.T) {
			e := newSchemaEnv(t, withAction(postsAndComments, action))
			e.exec(t, `INSERT INTO comments VALUES (100, 'b', 1), (101, 'b', 2)`)
			e.mustConfigure(t, map[string]any{"discover": true, "batch_size": 3})
			e.expectRefused(t, "a", "comments_post_id_fkey", "public.comments", "2 rows", "public.posts")
		})
	}
}

func TestCascadeIntoAnUnlistedTableIsCountedOrRefused(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, withAction(postsAndComments, "CASCADE"))
	// Only posts is listed: A's comments go by cascade and are counted.
	e.mustConfigure(t, map[string]any{"tables": []any{"posts"}, "batch_size": 2})
	e.expectErased(t, "a", victimRows{
		"public.posts":    "x.tenant_id = 'a'",
		"public.comments": "x.tenant_id = 'a'",
	})
	// A row without the tenant column hanging off B's posts by cascade is
	// not provably B's when the table is not listed: refused.
	e.exec(t, `CREATE TABLE likes (post_id int REFERENCES posts (id) ON DELETE CASCADE, who text)`)
	e.exec(t, `INSERT INTO likes VALUES (6, 'x'), (7, 'y')`)
	_, err := e.configure(t, map[string]any{"tables": []any{"posts"}})
	require.ErrorIs(t, err, sdk.ErrInvalidConfig, "the drift gate names the new table")
	require.Contains(t, err.Error(), "public.likes is not in tables but references public.posts (likes_post_id_fkey)")
	e.mustConfigure(t, map[string]any{"tables": []any{"posts"}, "ignore_tables": []any{"likes"}})
	e.expectRefused(t, "b", "public.likes", "2 rows")
}

func TestSetNullThatWouldLeaveTheTenantsRowsWithoutTenantIsRefused(t *testing.T) {
	t.Parallel()
	// A cycle: projects name their lead task (plain key), tasks belong to a
	// project with a composite key that nulls tenant_id too on delete.
	const ddl = `
CREATE TABLE projects (tenant_id text NOT NULL, id int, lead_task_id int, PRIMARY KEY (tenant_id, id));
CREATE TABLE tasks (tenant_id text, id int, project_id int, PRIMARY KEY (id),
	UNIQUE (tenant_id, id),
	CONSTRAINT tasks_project_fk FOREIGN KEY (tenant_id, project_id) REFERENCES projects (tenant_id, id) ON DELETE {action});
ALTER TABLE projects ADD CONSTRAINT projects_lead_fk FOREIGN KEY (tenant_id, lead_task_id) REFERENCES tasks (tenant_id, id);
INSERT INTO projects SELECT t, g, NULL FROM generate_series(1, 3) g, unnest(ARRAY['a', 'b']) t;
INSERT INTO tasks SELECT CASE WHEN g <= 15 THEN 'a' ELSE 'b' END, g, 1 + g % 3 FROM generate_series(1, 30) g;
UPDATE projects SET lead_task_id = (SELECT min(id) FROM tasks WHERE tasks.tenant_id = projects.tenant_id);
`
	t.Run("SET NULL of every column", func(t *testing.T) {
		e := newSchemaEnv(t, withAction(ddl, "SET NULL"))
		e.mustConfigure(t, map[string]any{"discover": true})
		e.expectRefused(t, "a", "tasks_project_fk", "tenant_id")
	})
	t.Run("SET NULL of the project column only", func(t *testing.T) {
		e := newSchemaEnv(t, withAction(ddl, "SET NULL (project_id)"))
		e.mustConfigure(t, map[string]any{"discover": true})
		e.expectErased(t, "a", victimRows{
			"public.projects": "x.tenant_id = 'a'",
			"public.tasks":    "x.tenant_id = 'a'",
		})
	})
}

// chinookEmployees is Chinook's employee table: reports_to references the
// same table with a plain key, and the tree is deep.
const chinookEmployees = `
CREATE TABLE employee (employee_id int PRIMARY KEY, tenant_id text NOT NULL, reports_to int REFERENCES employee (employee_id), name text);
CREATE INDEX ON employee (reports_to);
CREATE INDEX ON employee (tenant_id);
-- Tenant a: a chain 1 <- 2 <- ... <- 1500 and a bushy tree 1501..3000 under 1501,
-- inserted in an order that puts managers after their reports physically.
INSERT INTO employee SELECT g, 'a', NULL, 'e' FROM generate_series(1, 3000) g;
UPDATE employee SET reports_to = employee_id - 1 WHERE employee_id BETWEEN 2 AND 1500;
UPDATE employee SET reports_to = 1501 + (employee_id - 1501) / 3 WHERE employee_id > 1501;
INSERT INTO employee SELECT 3000 + g, 'b', NULL, 'e' FROM generate_series(1, 200) g;
UPDATE employee SET reports_to = employee_id - 1 WHERE employee_id > 3001;
`

func TestSelfReferencingTreeDeletesAtAnyBatchSize(t *testing.T) {
	t.Parallel()
	for mode, cfg := range map[string]map[string]any{
		"tables":   {"tables": []any{"employee"}, "batch_size": 2},
		"discover": {"discover": true, "batch_size": 2},
	} {
		t.Run(mode, func(t *testing.T) {
			e := newSchemaEnv(t, chinookEmployees)
			resp := e.mustConfigure(t, cfg)
			for _, w := range resp.Warnings {
				require.NotContains(t, w, "may delete a parent row before its children")
			}
			e.expectErased(t, "a", victimRows{"public.employee": "x.tenant_id = 'a'"})
		})
	}
	t.Run("a report of another tenant is refused", func(t *testing.T) {
		e := newSchemaEnv(t, chinookEmployees)
		e.exec(t, `UPDATE employee SET reports_to = 10 WHERE employee_id = 3001`)
		e.mustConfigure(t, map[string]any{"discover": true, "batch_size": 2})
		e.expectRefused(t, "a", "employee_reports_to_fkey", "1 row")
	})
	t.Run("rows that reference each other", func(t *testing.T) {
		e := newSchemaEnv(t, chinookEmployees)
		e.exec(t, `UPDATE employee SET reports_to = 1500 WHERE employee_id = 1`) // a loop of 1500
		e.mustConfigure(t, map[string]any{"discover": true, "batch_size": 2})
		e.expectErased(t, "a", victimRows{"public.employee": "x.tenant_id = 'a'"})
	})
}

const deferrableCycle = `
CREATE TABLE orgs (id int PRIMARY KEY, tenant_id text NOT NULL, owner_id int);
CREATE TABLE users (id int PRIMARY KEY, tenant_id text NOT NULL, org_id int NOT NULL
	CONSTRAINT users_org_fk REFERENCES orgs (id) DEFERRABLE INITIALLY IMMEDIATE);
ALTER TABLE orgs ADD CONSTRAINT orgs_owner_fk FOREIGN KEY (owner_id) REFERENCES users (id) DEFERRABLE INITIALLY DEFERRED;
BEGIN;
SET CONSTRAINTS ALL DEFERRED;
INSERT INTO orgs SELECT g, CASE WHEN g <= 3 THEN 'a' ELSE 'b' END, 10 * g FROM generate_series(1, 6) g;
INSERT INTO users SELECT 10 * o + u, CASE WHEN o <= 3 THEN 'a' ELSE 'b' END, o FROM generate_series(1, 6) o, generate_series(0, 4) u;
COMMIT;
`

func TestDeferrableCycleIsDeletedInOneTransaction(t *testing.T) {
	t.Parallel()
	for mode, cfg := range map[string]map[string]any{
		"discover":        {"discover": true, "batch_size": 2},
		"tables in order": {"tables": []any{"users", "orgs"}},
		"tables reversed": {"tables": []any{"orgs", "users"}},
	} {
		t.Run(mode, func(t *testing.T) {
			e := newSchemaEnv(t, deferrableCycle)
			e.mustConfigure(t, cfg)
			e.expectErased(t, "a", victimRows{
				"public.orgs":  "x.tenant_id = 'a'",
				"public.users": "x.tenant_id = 'a'",
			})
		})
	}
}

func TestPlainKeyCycleIsRefusedWithAdviceThatWorks(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE TABLE a (id int PRIMARY KEY, tenant_id text, b_id int);
CREATE TABLE b (id int PRIMARY KEY, tenant_id text, a_id int REFERENCES a (id));
ALTER TABLE a ADD FOREIGN KEY (b_id) REFERENCES b (id);`)
	_, err := e.configure(t, map[string]any{"discover": true})
	require.Error(t, err)
	require.Contains(t, err.Error(), "cycle")
	require.Contains(t, err.Error(), "DEFERRABLE")
	// The advice is true: make one key deferrable and the same schema works.
	e.exec(t, `ALTER TABLE a ALTER CONSTRAINT a_b_id_fkey DEFERRABLE`)
	e.exec(t, `BEGIN; SET CONSTRAINTS ALL DEFERRED;
		INSERT INTO a VALUES (1, 'x', 1), (2, 'y', 2); INSERT INTO b VALUES (1, 'x', 1), (2, 'y', 2); COMMIT;`)
	e.mustConfigure(t, map[string]any{"discover": true})
	e.expectErased(t, "x", victimRows{"public.a": "x.tenant_id = 'x'", "public.b": "x.tenant_id = 'x'"})
	// So is the other advice: a cascading key.
	e2 := newSchemaEnv(t, `
CREATE TABLE a (id int PRIMARY KEY, tenant_id text, b_id int);
CREATE TABLE b (id int PRIMARY KEY, tenant_id text, a_id int REFERENCES a (id) ON DELETE CASCADE);
ALTER TABLE a ADD FOREIGN KEY (b_id) REFERENCES b (id);
INSERT INTO a VALUES (1, 'x', NULL), (2, 'y', NULL); INSERT INTO b VALUES (1, 'x', 1), (2, 'y', 2);
UPDATE a SET b_id = id;`)
	e2.mustConfigure(t, map[string]any{"discover": true})
	e2.expectErased(t, "x", victimRows{"public.a": "x.tenant_id = 'x'", "public.b": "x.tenant_id = 'x'"})
}

// Tables without the tenant column that reference each other in a loop
// belong to a tenant only through themselves: refused, naming the loop.
func TestDependentTablesOwningEachOtherAreRefused(t *testing.T) {
	e := newSchemaEnv(t, `
CREATE TABLE posts (id int PRIMARY KEY, tenant_id text NOT NULL);
CREATE TABLE threads (id int PRIMARY KEY, post_id int NOT NULL REFERENCES posts (id), head_id int);
CREATE TABLE replies (id int PRIMARY KEY, thread_id int NOT NULL REFERENCES threads (id));
ALTER TABLE threads ADD FOREIGN KEY (head_id) REFERENCES replies (id);`)
	_, err := e.configure(t, map[string]any{"tables": []any{"replies", "threads", "posts"}})
	require.ErrorIs(t, err, sdk.ErrInvalidConfig)
	require.Contains(t, err.Error(), "tables without the tenant column reference each other in a loop (")
	require.Contains(t, err.Error(), "threads")
	require.Contains(t, err.Error(), "replies")
}
