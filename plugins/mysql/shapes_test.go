package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
)

// The bug MySQL invites: "tenant_id = ?" under a case-, accent- and
// pad-insensitive collation erases "ACME", "Acmé" and "acme " with "acme".
// Each table holds the same ids under another collation.
func TestTenantIDsMatchByteForByteWhateverTheCollation(t *testing.T) {
	for _, coll := range []string{"utf8mb4_general_ci", "utf8mb4_unicode_ci", "utf8mb4_bin", "latin1_swedish_ci", "utf8mb3_general_ci"} {
		t.Run(coll, func(t *testing.T) {
			charset := coll[:len(coll)-len("_general_ci")]
			switch coll {
			case "utf8mb4_unicode_ci", "utf8mb4_bin":
				charset = "utf8mb4"
			case "latin1_swedish_ci":
				charset = "latin1"
			}
			e := newSchemaEnv(t, fmt.Sprintf(`
CREATE TABLE notes (id INT AUTO_INCREMENT PRIMARY KEY, tenant_id VARCHAR(40) CHARACTER SET %s COLLATE %s NOT NULL, body TEXT, KEY (tenant_id));
INSERT INTO notes (tenant_id, body) VALUES ('acme', 'a1'), ('acme', 'a2'), ('ACME', 'upper'), ('Acme', 'title'), ('acme ', 'one space'),
	('acme  ', 'two spaces'), ('acmé', 'accent'), ('ACMÉ', 'accent upper'), ('acme\t', 'tab'), (' acme', 'leading');`, charset, coll))
			e.mustConfigure(t, map[string]any{"tables": []any{"notes"}, "batch_size": 1})
			for id, want := range map[string]int64{"ACME": 1, "acme ": 1, "acmé": 1, "ACMÉ": 1, " acme": 1, "Acme": 1, "acme  ": 1} {
				c, err := e.count(t, id)
				require.NoError(t, err, "Count(%q)", id)
				require.Equal(t, want, c.Count, "Count(%q) under %s", id, coll)
			}
			e.expectErased(t, "acme", victimRows{"notes": "CAST(x.tenant_id AS BINARY) = CAST(CONVERT('acme' USING " + charset + ") AS BINARY)"})
			e.expectErased(t, "acme ", victimRows{"notes": "x.body = 'one space'"})
			e.expectErased(t, "ACMÉ", victimRows{"notes": "x.body = 'accent upper'"})
		})
	}
}

func TestIDsTheColumnCannotHoldExactlyAreRefused(t *testing.T) {
	e := newSchemaEnv(t, `
CREATE TABLE latin (id INT PRIMARY KEY, tenant_id VARCHAR(20) CHARACTER SET latin1 NOT NULL);
CREATE TABLE fixed (id INT PRIMARY KEY, tenant_id CHAR(8) NOT NULL);
CREATE TABLE short (id INT PRIMARY KEY, tenant_id VARCHAR(4) NOT NULL);
CREATE TABLE numbered (id INT PRIMARY KEY, tenant_id INT NOT NULL);
CREATE TABLE tiny (id INT PRIMARY KEY, tenant_id TINYINT UNSIGNED NOT NULL);
INSERT INTO latin VALUES (1, '?mega'), (2, 'café');
INSERT INTO fixed VALUES (1, 'acme'), (2, 'acme '), (3, 'other');
INSERT INTO short VALUES (1, 'abcd');
INSERT INTO numbered VALUES (1, 5), (2, 5), (3, 6);
INSERT INTO tiny VALUES (1, 200), (2, 255);`)
	refused := func(t *testing.T, table, id, why string) {
		t.Helper()
		e.mustConfigure(t, map[string]any{"tables": []any{table}})
		before := e.snapshot(t)
		_, err := e.delete(t, id)
		require.Error(t, err, "Delete(%q) from %s", id, table)
		require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err), "%v", err)
		require.Contains(t, err.Error(), why)
		_, err = e.count(t, id)
		require.Error(t, err, "Count(%q) from %s", id, table)
		require.Equal(t, before, e.snapshot(t), "Delete(%q) changed nothing", id)
	}
	// latin1 has no Ω: converted, "Ωmega" would be "?mega", another tenant.
	refused(t, "latin", "Ωmega", "character set latin1 cannot hold")
	e.mustConfigure(t, map[string]any{"tables": []any{"latin"}})
	e.expectErased(t, "café", victimRows{"latin": "x.id = 2"})
	e.expectErased(t, "?mega", victimRows{"latin": "x.id = 1"})
	// CHAR drops trailing spaces when it stores a value: 'acme ' is 'acme'.
	require.EqualValues(t, 2, e.count1(t, `SELECT COUNT(*) FROM fixed WHERE CAST(tenant_id AS BINARY) = 'acme'`))
	refused(t, "fixed", "acme ", "CHAR column drops")
	e.mustConfigure(t, map[string]any{"tables": []any{"fixed"}})
	e.expectErased(t, "acme", victimRows{"fixed": "x.id IN (1, 2)"})
	refused(t, "short", "abcde", "longer than varchar(4)")
	for _, id := range []string{" 5", "5 ", "+5", "05", "5.0", "5e0", "0x5", "-0", "١"} {
		refused(t, "numbered", id, "canonical text of an integer")
	}
	refused(t, "numbered", "99999999999", "out of range")
	refused(t, "tiny", "256", "out of range")
	refused(t, "tiny", "-1", "out of range")
	e.mustConfigure(t, map[string]any{"tables": []any{"numbered"}})
	e.expectErased(t, "5", victimRows{"numbered": "x.tenant_id = 5"})
	e.mustConfigure(t, map[string]any{"tables": []any{"tiny"}})
	e.expectErased(t, "255", victimRows{"tiny": "x.id = 2"})
}

func TestUnsupportedTenantColumnTypesAreConfigErrors(t *testing.T) {
	e := newSchemaEnv(t, `
CREATE TABLE bin (id INT PRIMARY KEY, tenant_id BINARY(16) NOT NULL);
CREATE TABLE decs (id INT PRIMARY KEY, tenant_id DECIMAL(10,2) NOT NULL);`)
	_, err := e.configure(t, map[string]any{"tables": []any{"bin"}})
	require.ErrorIs(t, err, sdk.ErrInvalidConfig)
	require.Contains(t, err.Error(), "BINARY(n) pads")
	_, err = e.configure(t, map[string]any{"tables": []any{"decs"}})
	require.ErrorIs(t, err, sdk.ErrInvalidConfig)
	require.Contains(t, err.Error(), "decimal(10,2) is not supported")
}

func TestSeveralDatabasesAndQuotedMixedCaseIdentifiers(t *testing.T) {
	e := newSchemaEnv(t, "SELECT 1")
	billing, _ := testsvc.MySQLDatabase(t)
	other, _ := testsvc.MySQLDatabase(t)
	e.exec(t, fmt.Sprintf(`
CREATE TABLE `+"`Projects`"+` (`+"`Id`"+` INT PRIMARY KEY, `+"`TenantId`"+` VARCHAR(20) NOT NULL);
CREATE TABLE `+"`Comments`"+` (`+"`Id`"+` INT PRIMARY KEY, `+"`TenantId`"+` VARCHAR(20) NOT NULL, `+"`ProjectId`"+` INT, FOREIGN KEY (`+"`ProjectId`"+`) REFERENCES `+"`Projects` (`Id`"+`));
CREATE TABLE %[1]s.`+"`Invoice Lines`"+` (id INT PRIMARY KEY, `+"`TenantId`"+` VARCHAR(20) NOT NULL, `+"`Project`"+` INT,
	FOREIGN KEY (`+"`Project`"+`) REFERENCES %[2]s.`+"`Projects` (`Id`"+`));
CREATE TABLE %[3]s.unrelated (id INT, `+"`TenantId`"+` VARCHAR(20));
INSERT INTO `+"`Projects`"+` SELECT n, IF(n %% 2 = 0, 'Acme', 'acme') FROM nums WHERE n <= 10;
INSERT INTO `+"`Comments`"+` SELECT n, IF(n %% 2 = 1, 'Acme', 'acme'), 1 + (n %% 10) FROM nums WHERE n <= 40;
INSERT INTO %[1]s.`+"`Invoice Lines`"+` SELECT n, IF(n %% 2 = 1, 'Acme', 'acme'), 1 + (n %% 10) FROM nums WHERE n <= 20;
INSERT INTO %[3]s.unrelated SELECT n, 'Acme' FROM nums WHERE n <= 5;`, billing, e.name, other))
	for name, cfg := range map[string]map[string]any{
		"discover": {"discover": true, "schemas": []any{e.name, billing}, "tenant_column": "TenantId", "batch_size": 3},
		"tables":   {"tables": []any{"Comments", billing + ".Invoice Lines", "Projects"}, "tenant_column": "TenantId", "batch_size": 3},
	} {
		t.Run(name, func(t *testing.T) {
			e.mustConfigure(t, cfg)
			c, err := e.count(t, "Acme")
			require.NoError(t, err)
			require.Equal(t, map[string]int64{e.name + ".Projects": 5, e.name + ".Comments": 20, billing + ".Invoice Lines": 10}, nonZero(c.Breakdown))
		})
	}
	lines := func(pred string) []string { return e.rowsIn(t, billing, "Invoice Lines", pred) }
	before := lines("x.`TenantId` = 'acme' COLLATE utf8mb4_bin")
	unrelated := e.rowsIn(t, other, "unrelated", "TRUE")
	e.expectErased(t, "Acme", victimRows{
		"Projects":                 "x.`TenantId` = 'Acme' COLLATE utf8mb4_bin",
		"Comments":                 "x.`TenantId` = 'Acme' COLLATE utf8mb4_bin",
		billing + "|Invoice Lines": "x.`TenantId` = 'Acme' COLLATE utf8mb4_bin",
	})
	require.Empty(t, lines("x.`TenantId` = 'Acme' COLLATE utf8mb4_bin"), "erased in the other database too")
	require.Equal(t, before, lines("x.`TenantId` = 'acme' COLLATE utf8mb4_bin"))
	require.Equal(t, unrelated, e.rowsIn(t, other, "unrelated", "TRUE"), "a database not listed is not touched")
}

// citus is a schema with composite keys led by an integer tenant column,
// and the tenants table keyed by its own id.
const citus = `
CREATE TABLE companies (id BIGINT PRIMARY KEY, name TEXT);
CREATE TABLE campaigns (company_id BIGINT NOT NULL, id BIGINT NOT NULL, name TEXT, PRIMARY KEY (company_id, id),
	FOREIGN KEY (company_id) REFERENCES companies (id));
CREATE TABLE ads (company_id BIGINT NOT NULL, id BIGINT NOT NULL, campaign_id BIGINT NOT NULL, PRIMARY KEY (company_id, id),
	FOREIGN KEY (company_id, campaign_id) REFERENCES campaigns (company_id, id));
CREATE TABLE clicks (company_id BIGINT NOT NULL, id BIGINT NOT NULL, ad_id BIGINT NOT NULL, PRIMARY KEY (company_id, id),
	FOREIGN KEY (company_id, ad_id) REFERENCES ads (company_id, id) ON DELETE CASCADE);
INSERT INTO companies SELECT n, CONCAT('c', n) FROM nums WHERE n <= 12;
INSERT INTO campaigns SELECT c.n, g.n, 'x' FROM nums c, nums g WHERE c.n <= 12 AND g.n <= 3;
INSERT INTO ads SELECT c.n, g.n, 1 + g.n % 3 FROM nums c, nums g WHERE c.n <= 12 AND g.n <= 6;
INSERT INTO clicks SELECT c.n, g.n, 1 + g.n % 6 FROM nums c, nums g WHERE c.n <= 12 AND g.n <= 10;
`

func TestCompositeTenantKeysWithANumericTenantColumn(t *testing.T) {
	e := newSchemaEnv(t, citus)
	e.mustConfigure(t, map[string]any{"discover": true, "tenant_column": "company_id",
		"tenant_columns": map[string]any{"companies": "id"}, "batch_size": 4})
	e.expectErased(t, "4", victimRows{
		"companies": "x.id = 4",
		"campaigns": "x.company_id = 4",
		"ads":       "x.company_id = 4",
		"clicks":    "x.company_id = 4",
	})
}

// shop is a shared-schema SaaS database where only the top tables carry
// tenant_id: order lines and their notes hang off orders by foreign key.
const shop = `
CREATE TABLE products (id INT PRIMARY KEY, tenant_id VARCHAR(10) NOT NULL, name TEXT, KEY (tenant_id));
CREATE TABLE catalog_tags (id INT PRIMARY KEY, tag TEXT);
CREATE TABLE orders (id INT PRIMARY KEY, tenant_id VARCHAR(10) NOT NULL, KEY (tenant_id));
CREATE TABLE order_items (id INT PRIMARY KEY, order_id INT NOT NULL, product_id INT, tag_id INT, qty INT,
	FOREIGN KEY (order_id) REFERENCES orders (id), CONSTRAINT order_items_product FOREIGN KEY (product_id) REFERENCES products (id),
	FOREIGN KEY (tag_id) REFERENCES catalog_tags (id));
CREATE TABLE order_item_notes (id INT PRIMARY KEY, item_id INT NOT NULL, note TEXT, FOREIGN KEY (item_id) REFERENCES order_items (id));
INSERT INTO catalog_tags VALUES (1, 'red'), (2, 'blue');
INSERT INTO products SELECT n, IF(n <= 3, 'a', 'b'), 'p' FROM nums WHERE n <= 6;
INSERT INTO orders SELECT n, IF(n <= 4, 'a', 'b') FROM nums WHERE n <= 8;
INSERT INTO order_items SELECT n, 1 + (n - 1) % 8, IF((n - 1) % 8 < 4, 1 + n % 3, 4 + n % 3), 1 + n % 2, n FROM nums WHERE n <= 32;
INSERT INTO order_item_notes SELECT n, 1 + (n - 1) % 32, 'n' FROM nums WHERE n <= 64;
`

const aItems = "x.order_id IN (SELECT id FROM orders WHERE tenant_id = 'a')"

var shopVictims = victimRows{
	"products":         "x.tenant_id = 'a'",
	"orders":           "x.tenant_id = 'a'",
	"order_items":      aItems,
	"order_item_notes": "x.item_id IN (SELECT id FROM order_items x WHERE " + aItems + ")",
}

func TestRowsWithoutTenantColumnGoThroughTheirForeignKeyPath(t *testing.T) {
	e := newSchemaEnv(t, shop)
	resp := e.mustConfigure(t, map[string]any{"discover": true, "batch_size": 5})
	require.Empty(t, resp.Warnings)
	e.expectErased(t, "a", shopVictims)
}

func TestARowReferencingTwoTenantsIsRefused(t *testing.T) {
	e := newSchemaEnv(t, shop)
	// Item 1 is on tenant a's order 1 but names tenant b's product 5.
	e.exec(t, `UPDATE order_items SET product_id = 5 WHERE id = 1`)
	e.mustConfigure(t, map[string]any{"discover": true})
	e.expectRefused(t, "a", e.name+".order_items", "two tenants", "1 row")
	e.expectRefused(t, "b", e.name+".order_items", "1 row")
}

func TestUnlistedRowsWithoutTenantColumnBlockAndAreNamed(t *testing.T) {
	e := newSchemaEnv(t, shop)
	resp := e.mustConfigure(t, map[string]any{"tables": []any{"orders", "products"}})
	require.Contains(t, fmt.Sprint(resp.Warnings), "order_items")
	e.expectRefused(t, "a", e.name+".order_items", "order_items_ibfk_1", "16 rows", "add "+e.name+".order_items to tables")
	e.mustConfigure(t, map[string]any{"tables": []any{"order_item_notes", "order_items", "orders", "products"}})
	e.expectErased(t, "a", shopVictims)
}

func TestWarningsNameMissingIndexesAndEnginesWithoutTransactions(t *testing.T) {
	e := newSchemaEnv(t, `
CREATE TABLE slow (id INT PRIMARY KEY, tenant_id VARCHAR(10)) ENGINE=InnoDB;
CREATE TABLE legacy (id INT PRIMARY KEY, tenant_id VARCHAR(10), KEY (tenant_id)) ENGINE=MyISAM;`)
	resp := e.mustConfigure(t, map[string]any{"tables": []any{"slow", "legacy"}})
	joined := fmt.Sprint(resp.Warnings)
	require.Contains(t, joined, "table "+e.name+".slow has no index leading with tenant_id")
	require.Contains(t, joined, "MyISAM")
	_ = time.Second
}
