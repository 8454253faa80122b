package e2e

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// Through the real daemon, two schemas on which the first version of the
// postgres deleter ended a job COMPLETED and verified while it had deleted
// another tenant's row (FORCE ROW LEVEL SECURITY on a referencing table,
// the deleter connected as the owner as the docs advise) and left the
// tenant's own rows (citext installed in a schema off the deleter's
// search_path). Both deleters now refuse their config, say why, and the job
// is never verified; nothing changes.
func TestErasureOnSchemasTheDeleterCannotSeeIsNeverVerified(t *testing.T) {
	t.Parallel()
	ctx := testsvc.Context(t, 2*time.Minute)
	dsn := testsvc.PGDatabase(t)
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	owner := fmt.Sprintf("lcd_e2e_owner_%d", time.Now().UnixNano()%1_000_000_000)
	mustExec := func(sql string) {
		t.Helper()
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	mustExec(`CREATE ROLE ` + owner + ` LOGIN`)
	t.Cleanup(func() {
		ctx := testsvc.Context(t, time.Minute)
		_, _ = pool.Exec(ctx, `REASSIGN OWNED BY `+owner+` TO postgres`)
		_, _ = pool.Exec(ctx, `DROP OWNED BY `+owner)
		_, _ = pool.Exec(ctx, `DROP ROLE `+owner)
	})
	mustExec(`GRANT CREATE ON SCHEMA public TO ` + owner)
	mustExec(`CREATE SCHEMA extensions; CREATE EXTENSION citext SCHEMA extensions; GRANT USAGE ON SCHEMA extensions TO ` + owner)
	mustExec(`SET ROLE ` + owner + `;
CREATE TABLE projects (id int PRIMARY KEY, tenant_id text NOT NULL);
CREATE INDEX ON projects (tenant_id);
CREATE TABLE notes (id int PRIMARY KEY, tenant_id text NOT NULL, project_id int REFERENCES projects ON DELETE CASCADE);
CREATE INDEX ON notes (project_id); CREATE INDEX ON notes (tenant_id);
ALTER TABLE notes ENABLE ROW LEVEL SECURITY; ALTER TABLE notes FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON notes USING (tenant_id = current_setting('app.tenant_id', true));
CREATE TABLE contacts (id int PRIMARY KEY, tenant_id extensions.citext NOT NULL, email text);
CREATE INDEX ON contacts (tenant_id);
INSERT INTO projects VALUES (1, 'acme'), (2, 'globex');
RESET ROLE;
INSERT INTO notes VALUES (1, 'acme', 1), (2, 'globex', 1), (3, 'globex', 2);
INSERT INTO contacts VALUES (1, 'acme', 'a@acme'), (2, 'Acme', 'b@acme'), (3, 'globex', 'c@globex');`)

	u, err := url.Parse(dsn)
	require.NoError(t, err)
	u.User = url.User(owner)
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Daemon: `tenant_id_format = "^[a-z0-9-]{3,64}$"`,
		Extra: deletionTuning + postgresBlockIgnoring("postgres:projects", u.String(), []string{"contacts"}, "projects") +
			postgresBlockIgnoring("postgres:contacts", u.String(), []string{"projects", "notes"}, "contacts")})
	pl := pluginsSettled(t, d, 2)
	require.Equal(t, "failed", pl["postgres:projects"].State)
	require.Contains(t, pl["postgres:projects"].LastError, "row-level security")
	require.Equal(t, "failed", pl["postgres:contacts"].State)
	require.Contains(t, pl["postgres:contacts"].LastError, "search_path")

	rows := func() (notes, contacts string) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT string_agg(x::text, '|' ORDER BY id) FROM notes x`).Scan(&notes))
		require.NoError(t, pool.QueryRow(ctx, `SELECT string_agg(x::text, '|' ORDER BY id) FROM contacts x`).Scan(&contacts))
		return notes, contacts
	}
	notesBefore, contactsBefore := rows()
	startErasure(t, d, "acme")
	done := settled(t, d, "acme", 2*time.Minute)
	require.Equal(t, "BLOCKED", done.Status, "both deleters refused their configuration: retrying cannot help")
	require.False(t, done.Verified)
	notesAfter, contactsAfter := rows()
	require.Equal(t, notesBefore, notesAfter, "nothing changed")
	require.Equal(t, contactsBefore, contactsAfter, "nothing changed")
}
