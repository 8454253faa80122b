package main

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

func TestSeveralSchemasAndQuotedMixedCaseIdentifiers(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE SCHEMA "App";
CREATE SCHEMA billing;
CREATE TABLE "App"."Projects" ("Id" int PRIMARY KEY, "TenantId" text NOT NULL);
CREATE TABLE "App"."Comments" ("Id" int PRIMARY KEY, "TenantId" text NOT NULL, "ProjectId" int REFERENCES "App"."Projects" ("Id"));
CREATE TABLE billing."Invoice Lines" (id int PRIMARY KEY, "TenantId" text NOT NULL, "Project" int REFERENCES "App"."Projects" ("Id"));
CREATE TABLE public.unrelated (id int, "TenantId" text);
INSERT INTO "App"."Projects" SELECT g, CASE WHEN g % 2 = 0 THEN 'Acme' ELSE 'acme' END FROM generate_series(1, 10) g;
INSERT INTO "App"."Comments" SELECT g, CASE WHEN g % 2 = 1 THEN 'Acme' ELSE 'acme' END, 1 + (g % 10) FROM generate_series(1, 40) g;
INSERT INTO billing."Invoice Lines" SELECT g, CASE WHEN g % 2 = 1 THEN 'Acme' ELSE 'acme' END, 1 + (g % 10) FROM generate_series(1, 20) g;
INSERT INTO public.unrelated SELECT g, 'Acme' FROM generate_series(1, 5) g;
`)
	for name, cfg := range map[string]map[string]any{
		// public.unrelated holds the tenant id too: the proof looks in
		// every schema, so it is kept on purpose in both configs.
		"discover": {"discover": true, "schemas": []any{"App", "billing"}, "tenant_column": "TenantId", "batch_size": 3,
			"ignore_tables": []any{"unrelated"}},
		"tables": {"tables": []any{"App.Comments", `billing.Invoice Lines`, "App.Projects"}, "tenant_column": "TenantId", "batch_size": 3,
			"ignore_tables": []any{"unrelated"}},
	} {
		t.Run(name, func(t *testing.T) {
			e.mustConfigure(t, cfg)
			c, err := e.count(t, "Acme")
			require.NoError(t, err)
			require.Equal(t, map[string]int64{`App.Projects`: 5, `App.Comments`: 20, `billing.Invoice Lines`: 10}, nonZero(c.Breakdown))
		})
	}
	e.expectErased(t, "Acme", victimRows{
		"App.Projects":          `x."TenantId" = 'Acme'`,
		"App.Comments":          `x."TenantId" = 'Acme'`,
		"billing.Invoice Lines": `x."TenantId" = 'Acme'`,
	})
}

// citus is a Citus-style multi-tenant schema: composite keys led by the
// tenant column, and the tenants table keyed by its own id.
const citus = `
CREATE TABLE companies (id bigint PRIMARY KEY, name text);
CREATE TABLE campaigns (company_id bigint NOT NULL REFERENCES companies (id), id bigint NOT NULL, name text, PRIMARY KEY (company_id, id));
CREATE TABLE ads (company_id bigint NOT NULL, id bigint NOT NULL, campaign_id bigint NOT NULL, PRIMARY KEY (company_id, id),
	FOREIGN KEY (company_id, campaign_id) REFERENCES campaigns (company_id, id));
CREATE TABLE clicks (company_id bigint NOT NULL, id bigint NOT NULL, ad_id bigint NOT NULL, PRIMARY KEY (company_id, id),
	FOREIGN KEY (company_id, ad_id) REFERENCES ads (company_id, id) ON DELETE CASCADE);
INSERT INTO companies SELECT g, 'c' || g FROM generate_series(1, 12) g;
INSERT INTO campaigns SELECT c, g, 'x' FROM generate_series(1, 12) c, generate_series(1, 3) g;
INSERT INTO ads SELECT c, g, 1 + g % 3 FROM generate_series(1, 12) c, generate_series(1, 6) g;
INSERT INTO clicks SELECT c, g, 1 + g % 6 FROM generate_series(1, 12) c, generate_series(1, 10) g;
`

func TestCompositeTenantKeysWithANumericTenantColumn(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, citus)
	e.mustConfigure(t, map[string]any{"discover": true, "tenant_column": "company_id",
		"tenant_columns": map[string]any{"companies": "id"}, "batch_size": 4})
	e.expectErased(t, "4", victimRows{
		"public.companies": "x.id = 4",
		"public.campaigns": "x.company_id = 4",
		"public.ads":       "x.company_id = 4",
		"public.clicks":    "x.company_id = 4",
	})
	// Other spellings of a number are not tenant 5 (nor 4 again): refused, nothing touched.
	for _, id := range []string{" 5", "5 ", "+5", "05", "5.0", "5e0", "0x5", "-0", "١"} {
		before := e.snapshot(t)
		_, err := e.delete(t, id)
		require.Error(t, err, "Delete(%q)", id)
		require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err), "%v", err)
		_, err = e.count(t, id)
		require.Error(t, err, "Count(%q)", id)
		require.Equal(t, before, e.snapshot(t), "Delete(%q) changed nothing", id)
	}
	_, err := e.delete(t, "99999999999999999999")
	require.Error(t, err, "out of range for bigint")
}

func TestUUIDTenantColumnRefusesOtherSpellings(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE TABLE docs (id int PRIMARY KEY, tenant_id uuid NOT NULL);
INSERT INTO docs SELECT g, '44444444-dddd-4ddd-8ddd-444444444444' FROM generate_series(1, 5) g;
INSERT INTO docs SELECT 10 + g, '55555555-eeee-4eee-8eee-555555555555' FROM generate_series(1, 5) g;`)
	e.mustConfigure(t, map[string]any{"tables": []any{"docs"}})
	for _, id := range []string{"44444444-DDDD-4DDD-8DDD-444444444444", "{44444444-dddd-4ddd-8ddd-444444444444}",
		"44444444dddd4ddd8ddd444444444444", " 44444444-dddd-4ddd-8ddd-444444444444"} {
		before := e.snapshot(t)
		_, err := e.delete(t, id)
		require.Error(t, err, "Delete(%q)", id)
		require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err))
		require.Contains(t, err.Error(), "canonical")
		require.Equal(t, before, e.snapshot(t))
	}
	e.expectErased(t, "44444444-dddd-4ddd-8ddd-444444444444", victimRows{"public.docs": "x.tenant_id = '44444444-dddd-4ddd-8ddd-444444444444'"})
}

func TestCaseInsensitiveOrPaddedTenantColumns(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE TABLE fixed (id int PRIMARY KEY, tenant_id char(8) NOT NULL);
INSERT INTO fixed VALUES (1, 'acme'), (2, 'acme'), (3, 'other');`)
	e.mustConfigure(t, map[string]any{"tables": []any{"fixed"}})
	// char(n) ignores trailing blanks: "acme " would be tenant "acme".
	for _, id := range []string{"acme ", "acme  "} {
		_, err := e.delete(t, id)
		require.Error(t, err, "Delete(%q)", id)
		require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err))
	}
	e.expectErased(t, "acme", victimRows{"public.fixed": "x.tenant_id = 'acme'"})

	e2 := newSchemaEnv(t, `
CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE people (id int PRIMARY KEY, tenant_id text COLLATE ci NOT NULL);`)
	_, err := e2.configure(t, map[string]any{"tables": []any{"people"}})
	require.Error(t, err)
	require.Contains(t, err.Error(), "deterministic")
}

// shop is a shared-schema SaaS database where only the top tables carry
// tenant_id: order lines and their notes hang off orders by foreign key.
const shop = `
CREATE TABLE products (id int PRIMARY KEY, tenant_id text NOT NULL, name text);
CREATE TABLE catalog_tags (id int PRIMARY KEY, tag text);
CREATE TABLE orders (id int PRIMARY KEY, tenant_id text NOT NULL);
CREATE TABLE order_items (id int PRIMARY KEY, order_id int NOT NULL REFERENCES orders (id),
	product_id int REFERENCES products (id), tag_id int REFERENCES catalog_tags (id), qty int);
CREATE INDEX ON order_items (order_id);
CREATE TABLE order_item_notes (id int PRIMARY KEY, item_id int NOT NULL REFERENCES order_items (id), note text);
INSERT INTO catalog_tags VALUES (1, 'red'), (2, 'blue');
INSERT INTO products SELECT g, CASE WHEN g <= 3 THEN 'a' ELSE 'b' END, 'p' FROM generate_series(1, 6) g;
INSERT INTO orders SELECT g, CASE WHEN g <= 4 THEN 'a' ELSE 'b' END FROM generate_series(1, 8) g;
INSERT INTO order_items SELECT g, 1 + (g - 1) % 8, CASE WHEN (g - 1) % 8 < 4 THEN 1 + g % 3 ELSE 4 + g % 3 END, 1 + g % 2, g FROM generate_series(1, 32) g;
INSERT INTO order_item_notes SELECT g, 1 + (g - 1) % 32, 'n' FROM generate_series(1, 64) g;
`

func TestRowsWithoutTenantColumnGoThroughTheirForeignKeyPath(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, shop)
	e.mustConfigure(t, map[string]any{"discover": true, "batch_size": 5})
	aItems := "x.order_id IN (SELECT id FROM orders WHERE tenant_id = 'a')"
	e.expectErased(t, "a", victimRows{
		"public.products":         "x.tenant_id = 'a'",
		"public.orders":           "x.tenant_id = 'a'",
		"public.order_items":      aItems,
		"public.order_item_notes": "x.item_id IN (SELECT id FROM order_items x WHERE " + aItems + ")",
	})
}

func TestARowReferencingTwoTenantsIsRefused(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, shop)
	// Item 1 is on tenant a's order 1 but names tenant b's product 5.
	e.exec(t, `UPDATE order_items SET product_id = 5 WHERE id = 1`)
	e.mustConfigure(t, map[string]any{"discover": true})
	e.expectRefused(t, "a", "public.order_items", "two tenants", "1 row")
	e.expectRefused(t, "b", "public.order_items", "1 row")
}

func TestUnlistedRowsWithoutTenantColumnBlockAndAreNamed(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, shop)
	// With an explicit list that leaves out the line tables, the drift gate
	// names them...
	_, err := e.configure(t, map[string]any{"tables": []any{"orders", "products"}})
	require.ErrorIs(t, err, sdk.ErrInvalidConfig)
	require.Contains(t, err.Error(), "public.order_items is not in tables but references public.orders (order_items_order_id_fkey)")
	require.Contains(t, err.Error(), "public.order_item_notes is not in tables but references public.order_items")
	// ...and when they are ignored on purpose, a's orders are referenced by
	// rows this deleter would not delete: refused up front.
	e.mustConfigure(t, map[string]any{"tables": []any{"orders", "products"}, "ignore_tables": []any{"order_items", "order_item_notes"}})
	e.expectRefused(t, "a", "public.order_items", "order_items_order_id_fkey", "16 rows")
	// Listing them (child first) makes it work, through the FK path.
	e.mustConfigure(t, map[string]any{"tables": []any{"order_item_notes", "order_items", "orders", "products"}})
	aItems := "x.order_id IN (SELECT id FROM orders WHERE tenant_id = 'a')"
	e.expectErased(t, "a", victimRows{
		"public.products":         "x.tenant_id = 'a'",
		"public.orders":           "x.tenant_id = 'a'",
		"public.order_items":      aItems,
		"public.order_item_notes": "x.item_id IN (SELECT id FROM order_items x WHERE " + aItems + ")",
	})
}

func TestRowLevelSecurityThatHidesRowsIsRefused(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE TABLE notes (id int PRIMARY KEY, tenant_id text NOT NULL);
ALTER TABLE notes ENABLE ROW LEVEL SECURITY;
CREATE POLICY only_some ON notes USING (id < 3);
INSERT INTO notes SELECT g, 'a' FROM generate_series(1, 5) g;`)
	role := "lcd_rls_" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "_"))[:10] + fmt.Sprint(time.Now().UnixNano()%100000)
	e.exec(t, `CREATE ROLE `+role+` LOGIN`)
	t.Cleanup(func() {
		ctx := testsvc.Context(t, 2*time.Minute)
		_, _ = e.pool.Exec(ctx, `DROP OWNED BY `+role)
		_, _ = e.pool.Exec(ctx, `DROP ROLE `+role)
	})
	e.exec(t, `GRANT SELECT, DELETE ON notes TO `+role)
	u, err := url.Parse(e.dsn)
	require.NoError(t, err)
	u.User = url.User(role)
	_, err = e.d.Configure(testsvc.Context(t, time.Minute), &sdk.ConfigureRequest{Name: "x", Config: map[string]any{"dsn": u.String(), "tables": []any{"notes"}}})
	require.ErrorIs(t, err, sdk.ErrInvalidConfig)
	require.Contains(t, err.Error(), "row-level security")
	// The owner (here the superuser) sees every row: accepted.
	e.mustConfigure(t, map[string]any{"tables": []any{"notes"}})
}
