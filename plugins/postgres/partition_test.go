package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// pagilaPayments is Pagila's shape: payments partitioned by month, with the
// foreign key to customer declared on each partition, not on the parent.
// Tenant A paid in January, tenant B in February, in the same order, so the
// two partitions hold rows at the same ctids.
const pagilaPayments = `
CREATE TABLE customer (customer_id int PRIMARY KEY, tenant_id text NOT NULL, name text);
CREATE INDEX ON customer (tenant_id);
CREATE TABLE payment (payment_id int NOT NULL, tenant_id text NOT NULL, customer_id int NOT NULL,
	amount numeric(5,2), payment_date date NOT NULL, PRIMARY KEY (payment_date, payment_id)) PARTITION BY RANGE (payment_date);
CREATE TABLE payment_p2024_01 PARTITION OF payment FOR VALUES FROM ('2024-01-01') TO ('2024-02-01');
CREATE TABLE payment_p2024_02 PARTITION OF payment FOR VALUES FROM ('2024-02-01') TO ('2024-03-01');
ALTER TABLE payment_p2024_01 ADD CONSTRAINT payment_p2024_01_customer_fk FOREIGN KEY (customer_id) REFERENCES customer (customer_id);
ALTER TABLE payment_p2024_02 ADD CONSTRAINT payment_p2024_02_customer_fk FOREIGN KEY (customer_id) REFERENCES customer (customer_id);
CREATE INDEX ON payment (tenant_id);
CREATE INDEX ON payment (customer_id);
INSERT INTO customer SELECT g, CASE WHEN g <= 10 THEN 'tenant-a' ELSE 'tenant-b' END, 'c' || g FROM generate_series(1, 20) g;
INSERT INTO payment SELECT g, 'tenant-a', g, 1.5, '2024-01-15' FROM generate_series(1, 10) g;
INSERT INTO payment SELECT g, 'tenant-b', g + 10, 2.5, '2024-02-15' FROM generate_series(1, 10) g;
`

func TestRangePartitionsDeleteOnlyTheTenant(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]map[string]any{
		"tables":   {"tables": []any{"payment", "customer"}, "batch_size": 3},
		"discover": {"discover": true, "batch_size": 3},
	} {
		t.Run(name, func(t *testing.T) {
			e := newSchemaEnv(t, pagilaPayments)
			resp := e.mustConfigure(t, cfg)
			for _, w := range resp.Warnings {
				require.NotContains(t, w, "block deletes", "the FKs on the partitions are deleted child first: no warning")
			}
			e.expectErased(t, "tenant-a", victimRows{
				"public.customer": "x.tenant_id = 'tenant-a'",
				"public.payment":  "x.tenant_id = 'tenant-a'",
			})
			e.expectErased(t, "tenant-b", victimRows{
				"public.customer": "x.tenant_id = 'tenant-b'",
				"public.payment":  "x.tenant_id = 'tenant-b'",
			})
		})
	}
}

func TestHashPartitionsByTenantDeleteOnlyTheTenant(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE TABLE events (id int NOT NULL, tenant_id text NOT NULL, body text, PRIMARY KEY (tenant_id, id)) PARTITION BY HASH (tenant_id);
CREATE TABLE events_0 PARTITION OF events FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE events_1 PARTITION OF events FOR VALUES WITH (MODULUS 2, REMAINDER 1);
INSERT INTO events SELECT g, t, 'e' || g FROM generate_series(1, 10) g, unnest(ARRAY['a', 'b', 'c', 'd']) t;
`)
	// Every tenant's rows sit at the same ctids within their partition.
	e.mustConfigure(t, map[string]any{"tables": []any{"events"}, "batch_size": 4})
	for _, tenant := range []string{"a", "b", "c"} {
		e.expectErased(t, tenant, victimRows{"public.events": "x.tenant_id = '" + tenant + "'"})
	}
}

func TestListPartitionsWithDefaultAndSubpartitions(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, `
CREATE TABLE accounts (id int PRIMARY KEY, tenant_id text NOT NULL);
CREATE TABLE invoices (id int NOT NULL, tenant_id text NOT NULL, region text NOT NULL, account_id int NOT NULL REFERENCES accounts (id),
	issued date NOT NULL, PRIMARY KEY (region, issued, id)) PARTITION BY LIST (region);
CREATE TABLE invoices_eu PARTITION OF invoices FOR VALUES IN ('eu') PARTITION BY RANGE (issued);
CREATE TABLE invoices_eu_2024 PARTITION OF invoices_eu FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
CREATE TABLE invoices_eu_2025 PARTITION OF invoices_eu FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
CREATE TABLE invoices_other PARTITION OF invoices DEFAULT;
INSERT INTO accounts SELECT g, CASE WHEN g % 2 = 0 THEN 'a' ELSE 'b' END FROM generate_series(1, 8) g;
INSERT INTO invoices SELECT g, CASE WHEN g % 2 = 0 THEN 'a' ELSE 'b' END, r, g, d
	FROM generate_series(1, 8) g, unnest(ARRAY['eu', 'us']) r, unnest(ARRAY['2024-03-01', '2025-03-01']::date[]) d;
`)
	e.mustConfigure(t, map[string]any{"discover": true, "batch_size": 2})
	e.expectErased(t, "a", victimRows{
		"public.accounts": "x.tenant_id = 'a'",
		"public.invoices": "x.tenant_id = 'a'",
	})
}

func TestConfigureRefusesAPartitionListedInsteadOfItsRoot(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, pagilaPayments)
	_, err := e.configure(t, map[string]any{"tables": []any{"payment_p2024_01", "customer"}})
	require.Error(t, err)
	require.Contains(t, err.Error(), "partition of public.payment")
}

func TestAPartitionAttachedAfterConfigureIsDeletedToo(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t, pagilaPayments)
	e.mustConfigure(t, map[string]any{"tables": []any{"payment", "customer"}, "batch_size": 3})
	e.exec(t, `CREATE TABLE payment_p2024_03 PARTITION OF payment FOR VALUES FROM ('2024-03-01') TO ('2024-04-01');
		ALTER TABLE payment_p2024_03 ADD FOREIGN KEY (customer_id) REFERENCES customer (customer_id);
		INSERT INTO payment SELECT 100 + g, 'tenant-a', g, 3.5, '2024-03-15' FROM generate_series(1, 10) g;
		INSERT INTO payment SELECT 200 + g, 'tenant-b', g + 10, 3.5, '2024-03-16' FROM generate_series(1, 10) g;`)
	e.expectErased(t, "tenant-a", victimRows{
		"public.customer": "x.tenant_id = 'tenant-a'",
		"public.payment":  "x.tenant_id = 'tenant-a'",
	})
}
