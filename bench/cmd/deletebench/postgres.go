package main

import (
	"context"
	"fmt"
	"os/exec"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lifecycled/lifecycled/bench/internal/benchkit"
	"github.com/lifecycled/lifecycled/sdk"
)

func pgBench(steps, instances, defs, batch, rounds int) {
	benchkit.Header(fmt.Sprintf("PostgreSQL deleter: %d + %d + %d rows per tenant, two tenants", steps, instances, defs))
	ctx := context.Background()
	dsn, drop := benchkit.TempDatabase(ctx, benchkit.PGAdmin(), "lcd_bench")
	defer drop()
	pool, err := pgxpool.New(ctx, dsn)
	benchkit.Must(err, "connect")
	defer pool.Close()
	_, err = pool.Exec(ctx, `
		CREATE TABLE workflow_definitions (id bigserial PRIMARY KEY, tenant_id uuid NOT NULL, name text);
		CREATE TABLE workflow_instances (id bigserial PRIMARY KEY, tenant_id uuid NOT NULL,
			definition_id bigint NOT NULL REFERENCES workflow_definitions (id), state text);
		CREATE TABLE workflow_steps (id bigserial PRIMARY KEY, tenant_id uuid NOT NULL,
			instance_id bigint NOT NULL REFERENCES workflow_instances (id), payload text);
		CREATE INDEX ON workflow_definitions (tenant_id);
		CREATE INDEX ON workflow_instances (tenant_id);
		CREATE INDEX ON workflow_instances (definition_id);
		CREATE INDEX ON workflow_steps (tenant_id);
		CREATE INDEX ON workflow_steps (instance_id);`)
	benchkit.Must(err, "schema")
	seed := func(tenant string) {
		_, err := pool.Exec(ctx, `
			WITH d AS (INSERT INTO workflow_definitions (tenant_id, name) SELECT $1, 'definition' FROM generate_series(1, $4) RETURNING id),
			     dn AS (SELECT id, row_number() OVER (ORDER BY id) - 1 AS rn FROM d),
			     i AS (INSERT INTO workflow_instances (tenant_id, definition_id, state)
			           SELECT $1, dn.id, 'done' FROM generate_series(1, $3) g JOIN dn ON dn.rn = g % $4 RETURNING id),
			     inn AS (SELECT id, row_number() OVER (ORDER BY id) - 1 AS rn FROM i)
			INSERT INTO workflow_steps (tenant_id, instance_id, payload)
			SELECT $1, inn.id, 'step payload' FROM generate_series(1, $2) g JOIN inn ON inn.rn = g % $3`,
			tenant, steps, instances, defs)
		benchkit.Must(err, "seed "+tenant)
	}
	vacuum := func() {
		for _, t := range []string{"workflow_steps", "workflow_instances", "workflow_definitions"} {
			_, err := pool.Exec(ctx, "VACUUM ANALYZE "+t)
			benchkit.Must(err, "vacuum")
		}
	}
	count := func(tenant string) int64 {
		var n int64
		benchkit.Must(pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM workflow_steps WHERE tenant_id = $1)
			+ (SELECT count(*) FROM workflow_instances WHERE tenant_id = $1)
			+ (SELECT count(*) FROM workflow_definitions WHERE tenant_id = $1)`, tenant).Scan(&n), "count")
		return n
	}
	seedTook := benchkit.Time(func() { seed(tenantA); seed(tenantB); vacuum() })
	total := count(tenantA)
	benchkit.Report("seeded (both tenants)", "%d rows per tenant in %v", total, seedTook.Round(time.Millisecond))

	// Baseline: the three DELETEs in one psql transaction.
	baselineRun := func() time.Duration {
		took := benchkit.Time(func() {
			cmd := exec.Command("psql", dsn, "-q", "-v", "ON_ERROR_STOP=1", "-c", fmt.Sprintf(`BEGIN;
			DELETE FROM workflow_steps WHERE tenant_id = '%[1]s';
			DELETE FROM workflow_instances WHERE tenant_id = '%[1]s';
			DELETE FROM workflow_definitions WHERE tenant_id = '%[1]s';
			COMMIT;`, tenantA))
			out, err := cmd.CombinedOutput()
			benchkit.Must(err, "psql baseline: "+string(out))
		})
		if n := count(tenantA); n != 0 {
			benchkit.Must(fmt.Errorf("%d rows left", n), "baseline")
		}
		return took
	}

	p := benchkit.Launch(plugin("postgres"), sdk.KindTenantDeleter, pluginEnv...)
	defer p.Kill()
	d := p.Deleter(map[string]any{"dsn": dsn, "tables": []any{"workflow_steps", "workflow_instances", "workflow_definitions"},
		"batch_size": batch, "lock_timeout": "5s", "statement_timeout": "60s"})

	// The same plugin built without its proof (-tags lifecycled_noproof,
	// built by bench/run.sh): the difference is what recording and
	// checking the identities costs; Verify is timed on its own.
	np := benchkit.Launch(plugin("postgres-noproof"), sdk.KindTenantDeleter, pluginEnv...)
	defer np.Kill()
	dNoProof := np.Deleter(map[string]any{"dsn": dsn, "tables": []any{"workflow_steps", "workflow_instances", "workflow_definitions"},
		"batch_size": batch, "lock_timeout": "5s", "statement_timeout": "60s"})
	noProofRun := func() time.Duration {
		n, took := deleteWithPlugin(dNoProof, tenantA)
		if n != total || count(tenantA) != 0 || count(tenantB) != total {
			benchkit.Must(fmt.Errorf("deleted %d of %d, %d left, B has %d", n, total, count(tenantA), count(tenantB)), "plugin delete without proof")
		}
		return took
	}
	verifyRun := func() time.Duration {
		var left int64
		took := benchkit.Time(func() {
			resp, err := d.(sdk.Verifier).Verify(context.Background(), &sdk.VerifyRequest{TenantID: tenantA})
			benchkit.Must(err, "verify")
			left = resp.Left()
		})
		if left != 0 {
			benchkit.Must(fmt.Errorf("the proof found %d left", left), "verify")
		}
		return took
	}

	var longest time.Duration
	pluginRun := func() time.Duration {
		// Sample the plugin's open transactions to find the longest one.
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				var ms *float64
				_ = pool.QueryRow(ctx, `SELECT max(extract(epoch FROM clock_timestamp() - xact_start) * 1000)
				FROM pg_stat_activity WHERE application_name = 'lifecycled-plugin-postgres' AND xact_start IS NOT NULL
				AND state <> 'idle'`).Scan(&ms)
				if ms != nil && time.Duration(*ms*float64(time.Millisecond)) > longest {
					longest = time.Duration(*ms * float64(time.Millisecond))
				}
			}
		}()
		n, took := deleteWithPlugin(d, tenantA)
		close(stop)
		wg.Wait()
		if n != total || count(tenantA) != 0 || count(tenantB) != total {
			benchkit.Must(fmt.Errorf("deleted %d of %d, %d left, B has %d", n, total, count(tenantA), count(tenantB)), "plugin delete")
		}
		return took
	}

	// This machine is shared and noisy: alternate baseline and plugin runs
	// on freshly seeded data and compare medians.
	var baselines, plugins, noProofs, verifies []time.Duration
	for i := 0; i < rounds; i++ {
		if i > 0 {
			seed(tenantA)
			vacuum()
		}
		baselines = append(baselines, baselineRun())
		seed(tenantA)
		vacuum()
		plugins = append(plugins, pluginRun())
		verifies = append(verifies, verifyRun())
		seed(tenantA)
		vacuum()
		noProofs = append(noProofs, noProofRun())
	}
	benchkit.Sort(baselines)
	benchkit.Sort(plugins)
	benchkit.Sort(noProofs)
	benchkit.Sort(verifies)
	baseline, took := baselines[rounds/2], plugins[rounds/2]
	deletion, verify := noProofs[rounds/2], verifies[rounds/2]
	proof := took - deletion + verify
	benchkit.Report(fmt.Sprintf("plugin without its proof (the deletion alone), median of %d", rounds), "%v; runs %v", deletion.Round(time.Millisecond), noProofs)
	benchkit.Report(fmt.Sprintf("Verify (catalogue re-read, every tenant column counted), median of %d", rounds), "%v; runs %v", verify.Round(time.Millisecond), verifies)
	share := proof.Seconds() / deletion.Seconds()
	benchkit.Report("independent proof: identities and orphans in Delete + Verify (target <= 10% of the deletion)",
		"%v = %v in Delete + %v Verify: %.1f%% of the deletion %s; plugin peak RSS %d MiB",
		proof.Round(time.Millisecond), (took - deletion).Round(time.Millisecond), verify.Round(time.Millisecond), 100*share, verdict(share <= 0.10), p.PeakRSS()>>20)
	benchkit.Report(fmt.Sprintf("baseline: 3 DELETEs in one psql transaction, median of %d", rounds), "%v (%s); runs %v", baseline.Round(time.Millisecond), benchkit.Rate(total, baseline), baselines)
	benchkit.Report(fmt.Sprintf("plugin: batches of %d, median of %d", batch, rounds), "%v (%s), %d rows, exact; runs %v", took.Round(time.Millisecond), benchkit.Rate(total, took), total, plugins)
	benchkit.Ratio("PostgreSQL deleter, proof included, against the raw DELETEs", "raw", plugins, baselines, 1.15)
	benchkit.Report("longest plugin transaction (target < 1s)", "%v %s (sampled every 5 ms)", longest.Round(time.Millisecond), verdict(longest < time.Second))
}
