package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest"
)

func (e *schemaEnv) deleteChecked(t *testing.T, tenant, fingerprint string) (*sdk.DeleteResponse, error) {
	return e.d.Delete(testsvc.Context(t, 5*time.Minute), &sdk.DeleteRequest{TenantID: tenant, PlanFingerprint: fingerprint}, func(int64) {})
}

const staleShop = `
CREATE TABLE accounts (id INT PRIMARY KEY, tenant_id VARCHAR(40) NOT NULL, KEY (tenant_id));
CREATE TABLE notes (id INT PRIMARY KEY, tenant_id VARCHAR(40) NOT NULL, account_id INT, KEY (tenant_id),
	CONSTRAINT notes_account FOREIGN KEY (account_id) REFERENCES accounts (id));
INSERT INTO accounts VALUES (1, 'a'), (2, 'b');
INSERT INTO notes VALUES (1, 'a', 1), (2, 'b', 2), (3, 'a', 1);
`

// TestMySQLDeleteRefusesAPlanThatChangedAfterTheCheck: a table with the
// tenant column created between the daemon's plan check and its Delete
// was deleted from in discover mode without anyone having approved it.
// Delete now recomputes the fingerprint from the schema it deletes with
// and refuses the checked one, naming the table, deleting nothing.
func TestMySQLDeleteRefusesAPlanThatChangedAfterTheCheck(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, staleShop+`DROP TABLE nums;`)
	e.mustConfigure(t, map[string]any{"discover": true})
	checked := e.mustPlan(t, "a").Fingerprint

	e.exec(t, `CREATE TABLE invoices (id INT PRIMARY KEY, tenant_id VARCHAR(40) NOT NULL)`)
	e.exec(t, `INSERT INTO invoices VALUES (1, 'a'), (2, 'b')`)

	before := e.snapshot(t)
	_, err := e.deleteChecked(t, "a", checked)
	require.Error(t, err, "Delete with the fingerprint checked before the table was added must be refused")
	require.Equal(t, before, e.snapshot(t), "a refused Delete changes nothing: every tenant's rows are as they were")
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err), "%v", err)
	require.ErrorIs(t, err, sdk.ErrInvalidConfig)
	deleted, _ := sdk.DeletedBefore(err)
	require.Zero(t, deleted)
	require.Contains(t, err.Error(), `new: table "`+e.name+`.invoices" listed=true tenant "tenant_id"`)

	// A key changed after the check: refused as well.
	now := e.mustPlan(t, "a").Fingerprint
	e.exec(t, `ALTER TABLE notes DROP FOREIGN KEY notes_account`)
	e.exec(t, `ALTER TABLE notes ADD CONSTRAINT notes_account FOREIGN KEY (account_id) REFERENCES accounts (id) ON DELETE CASCADE`)
	_, err = e.deleteChecked(t, "a", now)
	require.Error(t, err)
	require.Equal(t, before, e.snapshot(t))
	require.Contains(t, err.Error(), "notes_account")

	// Checked again: deleted, tenant b's rows stay.
	resp, err := e.deleteChecked(t, "a", e.mustPlan(t, "a").Fingerprint)
	require.NoError(t, err)
	require.Equal(t, int64(4), resp.DeletedCount)
	require.Equal(t, int64(1), e.count1(t, `SELECT COUNT(*) FROM invoices WHERE tenant_id = 'b'`))
	require.Equal(t, int64(1), e.count1(t, `SELECT COUNT(*) FROM notes WHERE tenant_id = 'b'`))
	require.Equal(t, int64(1), e.count1(t, `SELECT COUNT(*) FROM accounts WHERE tenant_id = 'b'`))

	// Without a fingerprint (an older daemon) nothing is checked.
	e.exec(t, `CREATE TABLE later (id INT PRIMARY KEY, tenant_id VARCHAR(40) NOT NULL)`)
	e.exec(t, `INSERT INTO later VALUES (1, 'b')`)
	resp, err = e.deleteChecked(t, "b", "")
	require.NoError(t, err)
	require.Equal(t, int64(4), resp.DeletedCount)
}

// TestMySQLFingerprintNamesTheServerAndDatabase: the fingerprint names the
// server (server UUID, or MariaDB's host, port, data directory and server
// id) and the database, so that a plan approved for one database does not
// apply to another with the same schema; the same database gives the same
// fingerprint from any plugin process.
func TestMySQLFingerprintNamesTheServerAndDatabase(t *testing.T) {
	t.Parallel()
	one := newSchemaEnv(t, staleShop)
	two := newSchemaEnv(t, staleShop)
	cfg := map[string]any{"tables": []any{"notes", "accounts"}}
	one.mustConfigure(t, cfg)
	two.mustConfigure(t, cfg)
	fpOne := one.mustPlan(t, "a").Fingerprint
	require.NotEqual(t, fpOne, two.mustPlan(t, "a").Fingerprint)
	again := &schemaEnv{name: one.name, dsn: one.dsn, db: one.db, d: plugintest.Launch(t, binary(t), sdk.KindTenantDeleter).Deleter(t)}
	again.mustConfigure(t, map[string]any{"tables": cfg["tables"], "batch_size": 3})
	require.Equal(t, fpOne, again.mustPlan(t, "a").Fingerprint)

	store, err := storeIdentity(testsvc.Context(t, time.Minute), one.db, true)
	require.NoError(t, err)
	require.Regexp(t, `^mariadb host ".+" port \d+ datadir ".+" server_id \d+ database "`+one.name+`"$`, store)
}

// Another server with a database of the same name and schema gives
// another fingerprint: the store line is part of the hash.
func TestMySQLFingerprintCoversTheStore(t *testing.T) {
	m := &model{store: `server_uuid 1 database "app"`}
	var fps sdk.Fingerprints
	a := fps.Of(fingerprintLines(config{}, m))
	m.store = `server_uuid 2 database "app"`
	require.NotEqual(t, a, fps.Of(fingerprintLines(config{}, m)))
}

// A DELETE trigger added after the check runs with every delete: one that
// deleted another table's rows emptied a table not in the plan (outside
// attack). It is part of the fingerprint, so Delete refuses, naming it,
// and the plan names it for the approver.
func TestMySQLDeleteTriggerAddedAfterTheCheckIsAChangedPlan(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, staleShop+`CREATE TABLE audit (id INT PRIMARY KEY); INSERT INTO audit VALUES (1), (2);`)
	// zap runs before each row goes: refused unless acknowledged.
	e.mustConfigure(t, map[string]any{"tables": []any{"notes", "accounts"}, "acknowledged_hooks": []any{"accounts.zap"}})
	checked := e.mustPlan(t, "a").Fingerprint
	e.exec(t, `CREATE TRIGGER zap BEFORE DELETE ON accounts FOR EACH ROW DELETE FROM audit`)
	plan := e.mustPlan(t, "a")
	require.NotEqual(t, checked, plan.Fingerprint)
	require.Contains(t, strings.Join(plan.Notes, "\n"), "zap")
	before := e.snapshot(t)
	_, err := e.deleteChecked(t, "a", checked)
	require.Error(t, err)
	require.Equal(t, before, e.snapshot(t), "a refused Delete changes nothing")
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err), "%v", err)
	require.Contains(t, err.Error(), "zap")
}
