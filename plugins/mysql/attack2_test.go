package main

// Cases from the second outside attack (after the independent proof and
// guarded sessions landed). Each failed before its fix.

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

// F2: character_set_client=latin1 in the DSN made the server read the id's
// UTF-8 bytes as latin1: erasing "café" erased "cafÃ©", and the proof
// found nothing left.
func TestCharacterSetsArePinned(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE TABLE customers (id INT PRIMARY KEY, tenant_id VARCHAR(40) NOT NULL, KEY (tenant_id));
INSERT INTO customers VALUES (1, 'café'), (2, 'cafÃ©'), (3, 'globex');`)
	e.mustConfigure(t, map[string]any{"dsn": dsnWithParam(e.dsn, "character_set_client", "latin1"), "tables": []any{"customers"}})
	e.expectErased(t, "café", victimRows{"customers": "x.id = 1"})
}

// F3: sql_select_limit in the DSN cut the catalogue reads short: a key and
// a table fell past the limit, a cascade took another tenant's row, and
// the proof missed the tenant's invoice.
func TestSQLSelectLimitIsPinned(t *testing.T) {
	t.Parallel()
	var fks []string
	for i := 1; i <= 20; i++ {
		fks = append(fks, fmt.Sprintf("CONSTRAINT a0f%d FOREIGN KEY (p) REFERENCES a0 (id)", i))
	}
	e := newSchemaEnv(t, `
CREATE TABLE a0 (id INT PRIMARY KEY, p INT, `+strings.Join(fks, ", ")+`);
CREATE TABLE a_customers (id INT PRIMARY KEY, tenant_id VARCHAR(40) NOT NULL, KEY (tenant_id));
CREATE TABLE b_orders (id INT PRIMARY KEY, tenant_id VARCHAR(40) NOT NULL, customer_id INT NOT NULL, KEY (tenant_id),
	CONSTRAINT fk_cust FOREIGN KEY (customer_id) REFERENCES a_customers (id) ON DELETE CASCADE);
CREATE TABLE z_invoices (id INT PRIMARY KEY, tenant_id VARCHAR(40) NOT NULL, KEY (tenant_id));
INSERT INTO a_customers VALUES (1, 'acme'), (2, 'globex');
INSERT INTO b_orders VALUES (10, 'acme', 1), (11, 'globex', 2), (12, 'globex', 1);
INSERT INTO z_invoices VALUES (100, 'acme'), (101, 'globex');`)
	e.mustConfigure(t, map[string]any{"dsn": dsnWithParam(e.dsn, "sql_select_limit", "7"), "tables": []any{"b_orders", "a_customers"}, "ignore_tables": []any{"z_invoices"}})
	e.expectRefused(t, "acme", "fk_cust")
}

// F4: system_versioning_asof in the DSN made every read see the tables as
// of 2001: Count found nothing, the preflight nothing, and the cascade
// took another tenant's order.
func TestSystemVersioningAsOfIsPinned(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE TABLE customers (id INT PRIMARY KEY, tenant_id VARCHAR(40) NOT NULL, KEY (tenant_id)) WITH SYSTEM VERSIONING;
INSERT INTO customers VALUES (1, 'acme'), (2, 'globex');
CREATE TABLE orders (id INT PRIMARY KEY, tenant_id VARCHAR(40) NOT NULL, customer_id INT NOT NULL, KEY (tenant_id),
	FOREIGN KEY (customer_id) REFERENCES customers (id) ON DELETE CASCADE);
INSERT INTO orders VALUES (10, 'acme', 1), (11, 'globex', 1);`)
	e.mustConfigure(t, map[string]any{"dsn": dsnWithParam(e.dsn, "system_versioning_asof", "'2001-01-01 00:00:00'"),
		"tables": []any{"customers"}, "system_versioned": "delete_history"})
	e.expectRefused(t, "acme", "orders")
}

// F5: an AFTER DELETE trigger copied the tenant's row into a table of
// another database; the proof looked only in the databases of the listed
// tables.
func TestTheProofLooksWhereTriggersWrite(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE TABLE customers (id INT PRIMARY KEY, tenant_id VARCHAR(40) NOT NULL, email VARCHAR(100), KEY (tenant_id));
INSERT INTO customers VALUES (1, 'acme', 'a@acme.test'), (2, 'globex', 'g@globex.test');`)
	audit := e.name + "_audit"
	e.exec(t, "CREATE DATABASE "+audit)
	t.Cleanup(func() { _, _ = e.db.Exec("DROP DATABASE " + audit) })
	e.exec(t, "CREATE TABLE "+audit+".deleted_customers (id INT, tenant_id VARCHAR(40), email VARCHAR(100))")
	e.exec(t, "CREATE TRIGGER customers_ad AFTER DELETE ON customers FOR EACH ROW INSERT INTO "+audit+
		".deleted_customers (id, tenant_id, email) VALUES (OLD.id, OLD.tenant_id, OLD.email)")
	e.mustConfigure(t, map[string]any{"tables": []any{"customers"}})
	_, err := e.delete(t, "acme")
	require.NoError(t, err)
	v := e.verify(t, "acme")
	require.EqualValues(t, 1, v.Left(), "the audit copy is the tenant's row, left: %+v", v.Checks)
}

// F6: a user with table-level grants only: information_schema hides the
// tables and keys it cannot see, so the preflight missed a cascade into
// another tenant's order and the proof missed the tenant's invoice.
// Refused: the deleter needs to see whole databases.
func TestTableLevelGrantsAreRefused(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE TABLE customers (id INT PRIMARY KEY, tenant_id VARCHAR(40) NOT NULL, KEY (tenant_id));
CREATE TABLE orders (id INT PRIMARY KEY, tenant_id VARCHAR(40) NOT NULL, customer_id INT NOT NULL, KEY (tenant_id),
	FOREIGN KEY (customer_id) REFERENCES customers (id) ON DELETE CASCADE);
INSERT INTO customers VALUES (1, 'acme'), (2, 'globex');
INSERT INTO orders VALUES (10, 'acme', 1), (11, 'globex', 1), (12, 'globex', 2);`)
	user := "lcd_tg_" + strings.TrimPrefix(e.name, "lcd_test_")[:8]
	admin := testsvc.MySQLAdmin(t)
	ctx := testsvc.Context(t, time.Minute)
	for _, q := range []string{
		"CREATE USER '" + user + "'@'%' IDENTIFIED BY 'pw26'",
		"GRANT SELECT, DELETE ON `" + e.name + "`.`customers` TO '" + user + "'@'%'",
		"GRANT CREATE TEMPORARY TABLES ON `" + e.name + "`.* TO '" + user + "'@'%'",
	} {
		_, err := admin.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	t.Cleanup(func() { _, _ = admin.Exec("DROP USER '" + user + "'@'%'") })
	before := e.snapshot(t)
	_, err := e.configure(t, map[string]any{"dsn": user + ":pw26@tcp(127.0.0.1:3306)/" + url.PathEscape(e.name), "tables": []any{"customers"}})
	if err == nil {
		_, err = e.delete(t, "acme")
	}
	require.Error(t, err)
	require.Contains(t, err.Error(), "SELECT")
	require.Contains(t, err.Error(), e.name)
	require.Equal(t, before, e.snapshot(t), "nothing changed")
}

// F7: CHAR(n) drops trailing spaces, VARCHAR keeps them: with both in one
// deleter, "acme " is another tenant in one table and acme in the other.
func TestCharAndVarcharTenantColumnsInOneDeleterAreRefused(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE TABLE accounts (id INT PRIMARY KEY, tenant_id VARCHAR(20) COLLATE utf8mb4_bin NOT NULL);
CREATE TABLE legacy_invoices (id INT PRIMARY KEY, tenant_id CHAR(10) COLLATE utf8mb4_bin NOT NULL);
INSERT INTO accounts VALUES (1, 'acme'), (2, 'acme ');
INSERT INTO legacy_invoices VALUES (10, 'acme'), (11, 'acme ');`)
	_, err := e.configure(t, map[string]any{"tables": []any{"legacy_invoices", "accounts"}})
	require.Error(t, err)
	require.Contains(t, err.Error(), "trailing spaces")
	require.Contains(t, err.Error(), "legacy_invoices")
}

// F8: a trigger that refuses every delete stopped the erasure half way. A
// rehearsal of one row per table with delete triggers, rolled back, finds
// it before anything is deleted.
func TestATriggerThatRefusesDeletesIsFoundBeforeAnythingIsDeleted(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE TABLE sessions (id INT PRIMARY KEY, tenant_id VARCHAR(40) NOT NULL);
CREATE TABLE ledger (id INT PRIMARY KEY, tenant_id VARCHAR(40) NOT NULL, amount INT);
CREATE TRIGGER ledger_append_only AFTER DELETE ON ledger FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'ledger is append-only';
INSERT INTO sessions VALUES (1, 'acme'), (2, 'globex'), (3, 'acme');
INSERT INTO ledger VALUES (10, 'acme', 5), (11, 'globex', 7);`)
	e.mustConfigure(t, map[string]any{"tables": []any{"sessions", "ledger"}})
	before := e.snapshot(t)
	_, err := e.delete(t, "acme")
	require.Error(t, err)
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err), "%v", err)
	for _, f := range []string{"refused before deleting anything", "ledger", "append-only"} {
		require.Contains(t, err.Error(), f)
	}
	require.Equal(t, before, e.snapshot(t), "nothing changed")
}
