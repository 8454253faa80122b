package main

import (
	"testing"
)

// varchar has no = operator of its own: "col = $1" resolves to text = text
// (pg_catalog, always visible), which compares as varchar does. The
// catalogue check that the type's own = is on the search_path must not
// refuse it, in a listed table, a dependent's parent or a cascade target,
// nor through a domain.
func TestVarcharTenantColumnsAreAccepted(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE DOMAIN tenant_ref AS varchar(40);
CREATE TABLE accounts (id int PRIMARY KEY, tenant_id varchar(40) NOT NULL);
CREATE TABLE notes (id int PRIMARY KEY, tenant_id tenant_ref NOT NULL, account_id int REFERENCES accounts (id));
CREATE TABLE attachments (id int PRIMARY KEY, tenant_id character varying NOT NULL, account_id int REFERENCES accounts (id) ON DELETE CASCADE);
INSERT INTO accounts VALUES (1, 'Acme'), (2, 'acme'), (3, 'Acme '), (4, 'other');
INSERT INTO notes VALUES (1, 'Acme', 1), (2, 'acme', 2), (3, 'Acme ', 3), (4, 'Acme', 1);
INSERT INTO attachments VALUES (1, 'Acme', 1), (2, 'acme', 2), (3, 'other', 4);
`)
	for name, cfg := range map[string]map[string]any{
		"tables":   {"tables": []any{"notes", "accounts"}},
		"discover": {"discover": true},
	} {
		t.Run(name, func(t *testing.T) {
			e.mustConfigure(t, cfg)
		})
	}
	e.mustConfigure(t, map[string]any{"tables": []any{"notes", "accounts"}, "batch_size": 1})
	// Exactly "Acme": not "acme" nor "Acme " (varchar keeps trailing blanks).
	e.expectErased(t, "Acme", victimRows{
		"public.accounts":    `x.tenant_id = 'Acme'`,
		"public.notes":       `x.tenant_id = 'Acme'`,
		"public.attachments": `x.tenant_id = 'Acme'`,
	})
}
