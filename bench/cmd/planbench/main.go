// Command planbench measures what a deletion plan costs in the PostgreSQL
// deleter, against Count in the same run (Plan is Count plus the drift gate,
// the steps and the fingerprint; both read the catalogue and run the
// preflight) and against the bare count query (the least any count costs):
// a schema of -tables listed tables with -rows rows of tenant A each (and of
// tenant B), -ignored more tables with the tenant column in the same schema
// (all in ignore_tables, so the drift gate looks at each), and -foreign
// tables with the tenant column in another schema (not looked at). Calls
// alternate Count, Plan and the bare query for -rounds rounds; medians are
// compared.
package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lifecycled/lifecycled/bench/internal/benchkit"
	"github.com/lifecycled/lifecycled/sdk"
)

const (
	tenantA = "11111111-1111-1111-1111-111111111111"
	tenantB = "22222222-2222-2222-2222-222222222222"
)

func main() {
	tables := flag.Int("tables", 50, "listed tables")
	ignored := flag.Int("ignored", 500, "unlisted tables with the tenant column in the same schema, in ignore_tables")
	foreign := flag.Int("foreign", 500, "tables with the tenant column in another schema")
	rows := flag.Int("rows", 2000, "rows per tenant per listed table")
	rounds := flag.Int("rounds", 15, "alternating rounds")
	compare := flag.String("compare", "", "another build of the postgres plugin (one without the drift gate) whose Count is timed in the same rounds")
	flag.Parse()

	benchkit.Header(fmt.Sprintf("PostgreSQL Plan vs Count: %d listed tables x %d rows per tenant, %d ignored, %d in another schema",
		*tables, *rows, *ignored, *foreign))
	ctx := context.Background()
	dsn, drop := benchkit.TempDatabase(ctx, benchkit.PGAdmin(), "lcd_planbench")
	defer drop()
	pool, err := pgxpool.New(ctx, dsn)
	benchkit.Must(err, "connect")
	defer pool.Close()

	var ddl strings.Builder
	var listed, ignore, counts []string
	for i := 0; i < *tables; i++ {
		t := fmt.Sprintf("t_%03d", i)
		listed = append(listed, t)
		fmt.Fprintf(&ddl, "CREATE TABLE %s (id bigserial PRIMARY KEY, tenant_id uuid NOT NULL, payload text); CREATE INDEX ON %s (tenant_id);\n", t, t)
		fmt.Fprintf(&ddl, "INSERT INTO %s (tenant_id, payload) SELECT t, 'x' FROM generate_series(1, %d), unnest(ARRAY['%s', '%s']::uuid[]) t;\n", t, *rows, tenantA, tenantB)
		counts = append(counts, fmt.Sprintf("(SELECT count(*) FROM %s WHERE tenant_id = $1)", t))
	}
	for i := 0; i < *ignored; i++ {
		t := fmt.Sprintf("other_%03d", i)
		ignore = append(ignore, t)
		fmt.Fprintf(&ddl, "CREATE TABLE %s (id bigserial PRIMARY KEY, tenant_id uuid);\n", t)
	}
	ddl.WriteString("CREATE SCHEMA app2;\n")
	for i := 0; i < *foreign; i++ {
		fmt.Fprintf(&ddl, "CREATE TABLE app2.f_%03d (id bigserial PRIMARY KEY, tenant_id uuid);\n", i)
	}
	ddl.WriteString("ANALYZE;\n")
	took := benchkit.Time(func() { _, err = pool.Exec(ctx, ddl.String()); benchkit.Must(err, "schema") })
	benchkit.Report("schema and seed", "%v", took.Round(time.Millisecond))

	p := benchkit.Launch(filepath.Join(benchkit.Bin(), "lifecycled-plugin-postgres"), sdk.KindTenantDeleter, "GOMAXPROCS=1")
	defer p.Kill()
	cfg := map[string]any{"dsn": dsn, "tables": anys(listed), "ignore_tables": anys(ignore)}
	var d sdk.TenantDeleter
	took = benchkit.Time(func() { d = p.Deleter(cfg) })
	benchkit.Report("Configure (catalogue, model, drift gate)", "%v", took.Round(time.Millisecond))
	planner := d.(sdk.Planner)
	var other sdk.TenantDeleter
	if *compare != "" {
		q := benchkit.Launch(*compare, sdk.KindTenantDeleter, "GOMAXPROCS=1")
		defer q.Kill()
		other = q.Deleter(map[string]any{"dsn": dsn, "tables": anys(listed)})
	}

	bare := "SELECT " + strings.Join(counts, " + ")
	want := int64(*tables * *rows)
	var tCount, tPlan, tBare, tOther []time.Duration
	for r := 0; r < *rounds; r++ {
		if other != nil {
			tOther = append(tOther, benchkit.Time(func() {
				c, err := other.Count(ctx, &sdk.CountRequest{TenantID: tenantA})
				benchkit.Must(err, "Count (-compare)")
				check(c.Count, want, "Count (-compare)")
			}))
		}
		tCount = append(tCount, benchkit.Time(func() {
			c, err := d.Count(ctx, &sdk.CountRequest{TenantID: tenantA})
			benchkit.Must(err, "Count")
			check(c.Count, want, "Count")
		}))
		tPlan = append(tPlan, benchkit.Time(func() {
			pl, err := planner.Plan(ctx, &sdk.PlanRequest{TenantID: tenantA})
			benchkit.Must(err, "Plan")
			check(pl.Total(), want, "Plan")
			check(int64(len(pl.Steps)), int64(*tables), "Plan steps")
		}))
		tBare = append(tBare, benchkit.Time(func() {
			var n int64
			benchkit.Must(pool.QueryRow(ctx, bare, tenantA).Scan(&n), "bare count")
			check(n, want, "bare count")
		}))
	}
	mc, mp, mb := median(tCount), median(tPlan), median(tBare)
	benchkit.Report("bare count query (baseline)", "median %v, p90 %v", mb.Round(10*time.Microsecond), benchkit.Percentile(benchkit.Sort(tBare), 90).Round(10*time.Microsecond))
	benchkit.Report("Count through the plugin", "median %v, p90 %v (%.1fx the bare query)", mc.Round(10*time.Microsecond),
		benchkit.Percentile(benchkit.Sort(tCount), 90).Round(10*time.Microsecond), float64(mc)/float64(mb))
	if other != nil {
		mo := median(tOther)
		benchkit.Report("Count through the -compare build", "median %v, p90 %v (this build's Count is %.2fx it)", mo.Round(10*time.Microsecond),
			benchkit.Percentile(benchkit.Sort(tOther), 90).Round(10*time.Microsecond), float64(mc)/float64(mo))
	}
	benchkit.Report("Plan through the plugin", "median %v, p90 %v (%.2fx Count)", mp.Round(10*time.Microsecond),
		benchkit.Percentile(benchkit.Sort(tPlan), 90).Round(10*time.Microsecond), float64(mp)/float64(mc))
}

func anys(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func check(got, want int64, what string) {
	if got != want {
		benchkit.Must(fmt.Errorf("%s = %d, want %d", what, got, want), what)
	}
}

func median(d []time.Duration) time.Duration {
	return benchkit.Percentile(benchkit.Sort(append([]time.Duration(nil), d...)), 50)
}
