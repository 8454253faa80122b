package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

const postsAndComments = `
CREATE TABLE posts (id INT PRIMARY KEY, tenant_id VARCHAR(10) NOT NULL, KEY (tenant_id));
CREATE TABLE comments (id INT PRIMARY KEY, tenant_id VARCHAR(10) NOT NULL, post_id INT, KEY (tenant_id),
	CONSTRAINT comments_post FOREIGN KEY (post_id) REFERENCES posts (id) ON DELETE {action});
INSERT INTO posts SELECT n, IF(n <= 5, 'a', 'b') FROM nums WHERE n <= 10;
INSERT INTO comments SELECT n, IF(n <= 20, 'a', 'b'), IF(n <= 20, 1 + n % 5, 6 + n % 5) FROM nums WHERE n <= 40;
`

func TestCascadeOrSetNullIntoAnotherTenantIsRefused(t *testing.T) {
	for _, action := range []string{"CASCADE", "SET NULL"} {
		for mode, cfg := range map[string]map[string]any{
			"tables":   {"tables": []any{"comments", "posts"}},
			"discover": {"discover": true},
		} {
			t.Run(action+"/"+mode, func(t *testing.T) {
				e := newSchemaEnv(t, withAction(postsAndComments, action))
				// Tenant B commented on tenant A's posts 1 and 2; so did
				// "A", whom a case-insensitive comparison takes for "a".
				e.exec(t, `INSERT INTO comments VALUES (100, 'b', 1), (101, 'b', 2), (102, 'A', 3)`)
				e.mustConfigure(t, cfg)
				e.expectRefused(t, "a", "comments_post", e.name+".comments", "3 rows")
				// B's erasure is unaffected by A's rows.
				e.expectErased(t, "b", victimRows{
					"posts":    "x.tenant_id = 'b' COLLATE utf8mb4_bin",
					"comments": "x.tenant_id = 'b' COLLATE utf8mb4_bin",
				})
			})
		}
	}
}

// A plain key from another tenant's row is checked before anything is
// deleted: leaving it to the server stopped the erasure half way, with the
// tenant's comments already gone (and with foreign_key_checks = 0 in the
// DSN, let the delete through). The refusal names the key and counts the
// rows, and nothing changes.
func TestPlainKeyFromAnotherTenantIsRefusedBeforeAnythingIsDeleted(t *testing.T) {
	for _, action := range []string{"NO ACTION", "RESTRICT"} {
		t.Run(action, func(t *testing.T) {
			e := newSchemaEnv(t, withAction(postsAndComments, action))
			e.exec(t, `INSERT INTO comments VALUES (100, 'b', 1), (101, 'b', 2)`)
			e.mustConfigure(t, map[string]any{"discover": true, "batch_size": 3})
			e.expectRefused(t, "a", "comments_post", e.name+".comments", "2 rows", e.name+".posts", "refused before deleting anything")
		})
	}
}

func TestCascadeIntoAnUnlistedTableIsCountedOrRefused(t *testing.T) {
	e := newSchemaEnv(t, withAction(postsAndComments, "CASCADE"))
	// Only posts is listed: A's comments would go by cascade; the deleter
	// deletes them first itself, and counts them under their table.
	resp := e.mustConfigure(t, map[string]any{"tables": []any{"posts"}, "batch_size": 2})
	require.Contains(t, fmt.Sprint(resp.Warnings), "table "+e.name+".comments is not listed, but ON DELETE CASCADE (comments_post) reaches it")
	e.expectErased(t, "a", victimRows{
		"posts":    "x.tenant_id = 'a'",
		"comments": "x.tenant_id = 'a'",
	})
	// A row without the tenant column hanging off B's posts by cascade is
	// not provably B's when its table is not listed: refused.
	e.exec(t, `CREATE TABLE likes (post_id INT, who TEXT, FOREIGN KEY (post_id) REFERENCES posts (id) ON DELETE CASCADE)`)
	e.exec(t, `INSERT INTO likes VALUES (6, 'x'), (7, 'y')`)
	e.mustConfigure(t, map[string]any{"tables": []any{"posts"}})
	e.expectRefused(t, "b", e.name+".likes", "2 rows")
}

// Under a case-insensitive collation a composite key led by the tenant
// column does not keep tenants apart: a row of tenant "A" may reference a
// row of tenant "a", and the cascade would take it with "a".
func TestCompositeKeyOnACaseInsensitiveTenantColumnIsChecked(t *testing.T) {
	e := newSchemaEnv(t, `
CREATE TABLE projects (tenant_id VARCHAR(10) NOT NULL, id INT NOT NULL, PRIMARY KEY (tenant_id, id));
CREATE TABLE tasks (tenant_id VARCHAR(10) NOT NULL, id INT NOT NULL, project_id INT NOT NULL, PRIMARY KEY (tenant_id, id),
	CONSTRAINT tasks_project FOREIGN KEY (tenant_id, project_id) REFERENCES projects (tenant_id, id) ON DELETE CASCADE);
INSERT INTO projects VALUES ('a', 1), ('b', 1);
INSERT INTO tasks VALUES ('a', 1, 1), ('a', 2, 1), ('A', 3, 1), ('b', 4, 1);`)
	e.mustConfigure(t, map[string]any{"discover": true})
	e.expectRefused(t, "a", "tasks_project", e.name+".tasks", "1 row")
	e.expectErased(t, "b", victimRows{"projects": "x.tenant_id = 'b'", "tasks": "x.tenant_id = 'b'"})
}

func TestSetNullThatWouldLeaveTheTenantsRowsWithoutTenantIsRefused(t *testing.T) {
	// A cycle: projects name their lead task (plain key); tasks belong to a
	// project through a key whose SET NULL nulls tenant_id too.
	e := newSchemaEnv(t, `
CREATE TABLE projects (tenant_id VARCHAR(10) NOT NULL, id INT, lead_task_id INT, PRIMARY KEY (tenant_id, id), KEY (lead_task_id));
CREATE TABLE tasks (id INT PRIMARY KEY, tenant_id VARCHAR(10), project_id INT, KEY (tenant_id, id),
	CONSTRAINT tasks_project FOREIGN KEY (tenant_id, project_id) REFERENCES projects (tenant_id, id) ON DELETE SET NULL);
INSERT INTO projects SELECT t.v, n, NULL FROM nums, (SELECT 'a' v UNION ALL SELECT 'b') t WHERE n <= 3;
INSERT INTO tasks SELECT n, IF(n <= 15, 'a', 'b'), 1 + n % 3 FROM nums WHERE n <= 30;
ALTER TABLE projects ADD CONSTRAINT projects_lead FOREIGN KEY (lead_task_id) REFERENCES tasks (id);
UPDATE projects SET lead_task_id = (SELECT MIN(id) FROM tasks WHERE tasks.tenant_id = projects.tenant_id);`)
	e.mustConfigure(t, map[string]any{"discover": true})
	e.expectRefused(t, "a", "tasks_project", "tenant_id", "SET NULL")
}

// chinookEmployees is Chinook's employee table: reports_to references the
// same table with a plain key, and the tree is deep.
const chinookEmployees = `
CREATE TABLE employee (employee_id INT PRIMARY KEY, tenant_id VARCHAR(10) NOT NULL, reports_to INT, name TEXT, KEY (tenant_id),
	CONSTRAINT employee_reports_to FOREIGN KEY (reports_to) REFERENCES employee (employee_id) ON DELETE {action});
-- Tenant a: a chain 1 <- 2 <- ... <- 300 and a bushy tree 301..900 under 301,
-- inserted managers last, so that no order of ids is an order of deletion.
INSERT INTO employee SELECT n, 'a', NULL, 'e' FROM nums WHERE n <= 900;
UPDATE employee SET reports_to = employee_id - 1 WHERE employee_id BETWEEN 2 AND 300;
UPDATE employee SET reports_to = 301 + (employee_id - 301) DIV 3 WHERE employee_id > 301;
INSERT INTO employee SELECT 900 + n, 'b', NULL, 'e' FROM nums WHERE n <= 50;
UPDATE employee SET reports_to = employee_id - 1 WHERE employee_id > 901;
`

func TestSelfReferencingTreeDeletesAtAnyBatchSize(t *testing.T) {
	for mode, cfg := range map[string]map[string]any{
		"tables":   {"tables": []any{"employee"}, "batch_size": 2},
		"discover": {"discover": true, "batch_size": 7},
	} {
		t.Run(mode, func(t *testing.T) {
			e := newSchemaEnv(t, withAction(chinookEmployees, "NO ACTION"))
			e.mustConfigure(t, cfg)
			e.expectErased(t, "a", victimRows{"employee": "x.tenant_id = 'a'"})
		})
	}
	t.Run("a report of another tenant is refused", func(t *testing.T) {
		e := newSchemaEnv(t, withAction(chinookEmployees, "NO ACTION"))
		e.exec(t, `UPDATE employee SET reports_to = 10 WHERE employee_id = 901`)
		e.mustConfigure(t, map[string]any{"discover": true, "batch_size": 2})
		e.expectRefused(t, "a", "employee_reports_to", "1 row")
	})
	for _, action := range []string{"NO ACTION", "CASCADE", "SET NULL"} {
		t.Run("rows that reference each other in a loop, "+action, func(t *testing.T) {
			e := newSchemaEnv(t, withAction(chinookEmployees, action))
			e.exec(t, `UPDATE employee SET reports_to = 300 WHERE employee_id = 1`) // a loop of 300
			e.mustConfigure(t, map[string]any{"discover": true, "batch_size": 50})
			e.expectErased(t, "a", victimRows{"employee": "x.tenant_id = 'a'"})
		})
	}
	t.Run("a loop through a key that does not allow NULL is refused", func(t *testing.T) {
		e := newSchemaEnv(t, `
CREATE TABLE ring (id INT PRIMARY KEY, tenant_id VARCHAR(10) NOT NULL, next_id INT NOT NULL,
	CONSTRAINT ring_next FOREIGN KEY (next_id) REFERENCES ring (id));
SET FOREIGN_KEY_CHECKS = 0;
INSERT INTO ring VALUES (1, 'a', 2), (2, 'a', 3), (3, 'a', 1), (4, 'a', 4), (5, 'b', 5);
SET FOREIGN_KEY_CHECKS = 1;`)
		e.mustConfigure(t, map[string]any{"tables": []any{"ring"}})
		before := e.snapshot(t)
		_, err := e.delete(t, "a")
		require.Error(t, err)
		require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err), "%v", err)
		require.Contains(t, err.Error(), "refused before deleting anything: 4 rows of "+e.name+".ring reference this tenant's rows through ring_next")
		require.Contains(t, err.Error(), "do not allow NULL")
		require.Equal(t, before, e.snapshot(t))
	})
}

func TestKeyCycleIsRefusedWithAdviceThatWorks(t *testing.T) {
	const cycle = `
CREATE TABLE a (id INT PRIMARY KEY, tenant_id VARCHAR(10), b_id INT);
CREATE TABLE b (id INT PRIMARY KEY, tenant_id VARCHAR(10), a_id INT, CONSTRAINT b_a FOREIGN KEY (a_id) REFERENCES a (id) ON DELETE {b_a});
INSERT INTO a SELECT n, IF(n % 2 = 0, 'x', 'y'), NULL FROM nums WHERE n <= 20;
INSERT INTO b SELECT n, IF(n % 2 = 0, 'x', 'y'), n FROM nums WHERE n <= 20;
INSERT INTO b SELECT 100 + n, IF(n % 2 = 0, 'x', 'y'), NULL FROM nums WHERE n <= 4;
UPDATE a SET b_id = id;
ALTER TABLE a ADD CONSTRAINT a_b FOREIGN KEY (b_id) REFERENCES b (id) ON DELETE {a_b};`
	schema := func(bA, aB string) string {
		return strings.NewReplacer("{b_a}", bA, "{a_b}", aB).Replace(cycle)
	}
	for name, tc := range map[string]struct{ bA, aB, want string }{
		"two plain keys":            {"NO ACTION", "NO ACTION", "make one key of the cycle ON DELETE SET NULL"},
		"a cascade and a plain key": {"CASCADE", "NO ACTION", "make a_b ON DELETE CASCADE too"},
	} {
		t.Run(name, func(t *testing.T) {
			e := newSchemaEnv(t, schema(tc.bA, tc.aB))
			_, err := e.configure(t, map[string]any{"discover": true})
			require.ErrorIs(t, err, sdk.ErrInvalidConfig)
			require.Contains(t, err.Error(), "cycle")
			require.Contains(t, err.Error(), tc.want)
		})
	}
	// The advice is true, and what the cascades remove is counted.
	for name, tc := range map[string]struct{ bA, aB string }{
		"every key cascades":     {"CASCADE", "CASCADE"},
		"one key sets null":      {"NO ACTION", "SET NULL"},
		"and the other cascades": {"CASCADE", "SET NULL"},
	} {
		t.Run(name, func(t *testing.T) {
			e := newSchemaEnv(t, schema(tc.bA, tc.aB))
			e.mustConfigure(t, map[string]any{"discover": true, "batch_size": 3})
			e.expectErased(t, "x", victimRows{"a": "x.tenant_id = 'x'", "b": "x.tenant_id = 'x'"})
		})
	}
}

// Two tables that reference each other with ON DELETE CASCADE (a document
// and its current version): a batch of one removes rows of both.
func TestMutualCascadeIsCountedAtAnyBatchSize(t *testing.T) {
	e := newSchemaEnv(t, `
CREATE TABLE documents (id INT PRIMARY KEY, tenant_id VARCHAR(10) NOT NULL, current_version INT);
CREATE TABLE versions (id INT PRIMARY KEY, tenant_id VARCHAR(10) NOT NULL, document_id INT NOT NULL,
	FOREIGN KEY (document_id) REFERENCES documents (id) ON DELETE CASCADE);
ALTER TABLE documents ADD FOREIGN KEY (current_version) REFERENCES versions (id) ON DELETE CASCADE;
INSERT INTO documents VALUES (1, 'a', NULL), (2, 'a', NULL), (3, 'b', NULL);
INSERT INTO versions VALUES (1, 'a', 1), (2, 'a', 1), (3, 'a', 1), (4, 'a', 2), (5, 'a', 2), (6, 'b', 3);
UPDATE documents SET current_version = CASE id WHEN 1 THEN 1 WHEN 2 THEN 4 ELSE 6 END;`)
	e.mustConfigure(t, map[string]any{"tables": []any{"versions", "documents"}, "batch_size": 1})
	e.expectErased(t, "a", victimRows{"documents": "x.tenant_id = 'a'", "versions": "x.tenant_id = 'a'"})
}

// The server kills the deleter's connections part way: the error is
// retryable, its partial count never more than what went and short by at
// most the batch in flight (a batch whose commit landed just before the
// kill, without its answer reaching the plugin), and the next Delete
// finishes. The connections are killed again and again from the first
// batch on, so one kill lands inside a batch's transaction (a connection
// killed between batches is only replaced by database/sql): the delete
// cannot finish, and the test cannot pass without the kill.
func TestConnectionsKilledMidDeleteIsPartialAndRetryable(t *testing.T) {
	f := newFixture(t)
	d := newSchemaEnvFor(t, f)
	seeded := f.Seed(t, "victim", 20000)
	ctx := testsvc.Context(t, 2*time.Minute)
	user := f.user(t)
	firstBatch, stop, stopped := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var kills int
	go func() {
		defer close(stopped)
		select {
		case <-firstBatch:
		case <-stop:
			return
		}
		for {
			select {
			case <-stop:
				return
			default:
			}
			rs, err := f.db.QueryContext(context.Background(), `SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ?`, user)
			if err != nil {
				continue
			}
			var ids []int64
			for rs.Next() {
				var id int64
				if rs.Scan(&id) == nil {
					ids = append(ids, id)
				}
			}
			rs.Close()
			for _, id := range ids {
				if _, err := f.db.ExecContext(context.Background(), fmt.Sprintf("KILL CONNECTION %d", id)); err == nil {
					kills++
				}
			}
		}
	}()
	var once sync.Once
	_, err := d.Delete(ctx, &sdk.DeleteRequest{TenantID: "victim"}, func(int64) { once.Do(func() { close(firstBatch) }) })
	close(stop)
	<-stopped
	require.Error(t, err, "the delete finished although %d of its connections were killed", kills)
	require.Positive(t, kills)
	require.Equal(t, sdk.ClassRetryable, sdk.ClassOf(err), "%v", err)
	deleted, ok := sdk.DeletedBefore(err)
	require.True(t, ok)
	remaining := f.Remaining(t, "victim")
	require.Positive(t, remaining, "stopped part way")
	require.LessOrEqual(t, deleted, seeded-remaining, "the partial count never overstates")
	require.LessOrEqual(t, seeded-remaining-deleted, int64(500), "short by at most one batch (batch_size 500)")
	resp, err := d.Delete(ctx, &sdk.DeleteRequest{TenantID: "victim"}, func(int64) {})
	require.NoError(t, err)
	require.Equal(t, remaining, resp.DeletedCount)
	require.Zero(t, f.Remaining(t, "victim"))
}

// Tables without the tenant column that reference each other in a loop
// belong to a tenant only through themselves: refused, naming the loop.
func TestDependentTablesOwningEachOtherAreRefused(t *testing.T) {
	e := newSchemaEnv(t, `
CREATE TABLE posts (id INT PRIMARY KEY, tenant_id VARCHAR(10) NOT NULL, KEY (tenant_id));
CREATE TABLE threads (id INT PRIMARY KEY, post_id INT NOT NULL, head_id INT, FOREIGN KEY (post_id) REFERENCES posts (id));
CREATE TABLE replies (id INT PRIMARY KEY, thread_id INT NOT NULL, FOREIGN KEY (thread_id) REFERENCES threads (id));
ALTER TABLE threads ADD FOREIGN KEY (head_id) REFERENCES replies (id);`)
	_, err := e.configure(t, map[string]any{"tables": []any{"replies", "threads", "posts"}})
	require.ErrorIs(t, err, sdk.ErrInvalidConfig)
	require.Contains(t, err.Error(), "tables without the tenant column reference each other in a loop (")
	require.Contains(t, err.Error(), "threads")
	require.Contains(t, err.Error(), "replies")
}
