// Command reverifybench measures a re-verification pass of the daemon over
// N ledger tenants whose erased data lives in PostgreSQL (through the
// postgres plugin): the pass with no effective rate limit against two
// baselines on the same data, the same N count queries sent straight to
// PostgreSQL from one connection (the store's own cost) and N counts
// through the daemon's count route one after another (the plugin's cost of
// a count, which re-reads the schema every call); then a pass at a
// reverify_rate below what the free pass reached, whose measured rate must
// not exceed it.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lifecycled/lifecycled/bench/internal/benchkit"
	"github.com/lifecycled/lifecycled/daemon/adminclient"
)

var counted = regexp.MustCompile(`(?m)^lifecycled_erasure_reverified_tenants_total\{result="(clean|resurrected)"\} (\S+)$`)

func main() {
	tenants := flag.Int("tenants", 5000, "ledger tenants")
	others := flag.Int("rows", 500000, "rows of tenants not in the ledger (the store's bulk)")
	back := flag.Int("resurrected", 20, "ledger tenants whose rows are back")
	limited := flag.Float64("rate", 100, "reverify_rate of the limited pass")
	flag.Parse()
	benchkit.Header(fmt.Sprintf("re-verification: %d ledger tenants (%d resurrected) over a %d-row PostgreSQL table", *tenants, *back, *others))
	ctx := context.Background()
	stateDSN, dropState := benchkit.TempDatabase(ctx, benchkit.PGAdmin(), "lcd_rvbench_state")
	defer dropState()
	appDSN, dropApp := benchkit.TempDatabase(ctx, benchkit.PGAdmin(), "lcd_rvbench_app")
	defer dropApp()

	app, err := pgxpool.New(ctx, appDSN)
	benchkit.Must(err, "connect app")
	defer app.Close()
	_, err = app.Exec(ctx, `CREATE TABLE items (id bigserial PRIMARY KEY, tenant_id uuid NOT NULL, payload text NOT NULL);
		CREATE INDEX ON items (tenant_id)`)
	benchkit.Must(err, "schema")
	_, err = app.Exec(ctx, `INSERT INTO items (tenant_id, payload)
		SELECT md5((g % 2000)::text)::uuid, repeat('x', 64) FROM generate_series(1, $1) g`, *others)
	benchkit.Must(err, "bulk rows")

	config := func(rate float64) benchkit.DaemonConfig {
		return benchkit.DaemonConfig{
			DirPrefix: "rvb", State: stateDSN, LogLevel: "error", StateDirectory: true,
			Deletion: fmt.Sprintf(`reverify_interval = "0s"
reverify_rate = %v
`, rate),
			Rest: fmt.Sprintf(`[[deleter]]
name = "postgres:items"
plugin = "postgres"
[deleter.config]
dsn = %q
tables = ["items"]
tenant_column = "tenant_id"
`, appDSN),
			Timeout: time.Hour, ReadyTries: 601,
		}
	}
	d := benchkit.StartDaemon(config(100000))
	defer d.Stop()
	exchange, api := d.Exchange, d.API

	// The ledger, as jobs of this store would have left it.
	state, err := pgxpool.New(ctx, stateDSN)
	benchkit.Must(err, "connect state")
	defer state.Close()
	_, err = state.Exec(ctx, `INSERT INTO lifecycle.erasure_ledger (job_id, tenant_id, erased_at, receipt_sha256, source, recorded_at)
		SELECT gen_random_uuid(), gen_random_uuid()::text, now(), '', 'local', now() FROM generate_series(1, $1)`, *tenants)
	benchkit.Must(err, "ledger")
	// Some of them are back, as a restored backup would bring them.
	rows, err := state.Query(ctx, `SELECT tenant_id FROM lifecycle.erasure_ledger ORDER BY tenant_id LIMIT $1`, *back)
	benchkit.Must(err, "read ledger")
	var ids []string
	for rows.Next() {
		var id string
		benchkit.Must(rows.Scan(&id), "scan")
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		_, err := app.Exec(ctx, `INSERT INTO items (tenant_id, payload) SELECT $1::uuid, 'back' FROM generate_series(1, 3)`, id)
		benchkit.Must(err, "resurrect")
	}
	_, err = app.Exec(ctx, `VACUUM ANALYZE items`)
	benchkit.Must(err, "vacuum")
	all, err := state.Query(ctx, `SELECT tenant_id FROM lifecycle.erasure_ledger`)
	benchkit.Must(err, "read ledger")
	var every []string
	for all.Next() {
		var id string
		benchkit.Must(all.Scan(&id), "scan")
		every = append(every, id)
	}
	all.Close()

	// Baseline: the count queries alone, one connection, one after another.
	conn, err := pgx.Connect(ctx, appDSN)
	benchkit.Must(err, "connect baseline")
	var found int
	base := benchkit.Time(func() {
		for _, id := range every {
			var n int64
			benchkit.Must(conn.QueryRow(ctx, `SELECT count(*) FROM items WHERE tenant_id = $1`, id).Scan(&n), "count")
			if n > 0 {
				found++
			}
		}
	})
	conn.Close(ctx)

	// Baseline: the same counts through the daemon's count route, one
	// after another: the sum of the exchanges, each the request sent to
	// the answer read (benchkit.Exchange).
	var route time.Duration
	for _, id := range every {
		var code int
		_, err := api.Counts(ctx, id, adminclient.Status(&code))
		benchkit.Must(err, "counts")
		if code != http.StatusOK {
			benchkit.Must(fmt.Errorf("status %d", code), "counts")
		}
		route += exchange.Took
	}

	pass := func() (time.Duration, int64) {
		before := reverified(api)
		start := time.Now()
		var code int
		_, err := api.Reverify(ctx, adminclient.Status(&code))
		benchkit.Must(err, "reverify")
		if code != http.StatusAccepted {
			benchkit.Must(fmt.Errorf("status %d", code), "reverify")
		}
		for reverified(api)-before < int64(*tenants) {
			// Seldom: a scrape costs the daemon CPU the pass would use.
			time.Sleep(100 * time.Millisecond)
		}
		return time.Since(start), reverified(api) - before
	}
	free, n := pass()
	resurrections := metric(api, `lifecycled_erasure_resurrections_total{deleter="postgres:items"}`)

	d.WriteConfig(config(*limited))
	_, err = api.Reload(ctx)
	benchkit.Must(err, "reload")
	slow, m := pass()

	benchkit.Report("baseline: the count queries, one connection", "%v (%s), %d found", base.Round(time.Millisecond), benchkit.Rate(int64(len(every)), base), found)
	benchkit.Report("baseline: GET /api/v1/tenants/{t}/counts, one after another", "%v (%s)", route.Round(time.Millisecond), benchkit.Rate(int64(len(every)), route))
	benchkit.Report("daemon pass, reverify_rate 100000", "%v (%s), %d tenants, %.0f resurrections; %.2fx the count route's time, %.1fx the raw queries'",
		free.Round(time.Millisecond), benchkit.Rate(n, free), n, resurrections, free.Seconds()/route.Seconds(), free.Seconds()/base.Seconds())
	measured := float64(m) / slow.Seconds()
	verdict := "within"
	if measured > *limited {
		verdict = "OVER"
	}
	benchkit.Report(fmt.Sprintf("daemon pass, reverify_rate %.0f", *limited), "%v, measured %.1f tenants/s: %s the limit", slow.Round(time.Millisecond), measured, verdict)
}

func scrape(api *adminclient.Client) string {
	text, err := api.Metrics(context.Background())
	benchkit.Must(err, "metrics")
	return text
}

func reverified(c *adminclient.Client) int64 {
	var n int64
	for _, m := range counted.FindAllStringSubmatch(scrape(c), -1) {
		f, _ := strconv.ParseFloat(m[2], 64)
		n += int64(f)
	}
	return n
}

func metric(c *adminclient.Client, series string) float64 {
	for _, line := range strings.Split(scrape(c), "\n") {
		if strings.HasPrefix(line, series+" ") {
			f, _ := strconv.ParseFloat(strings.TrimPrefix(line, series+" "), 64)
			return f
		}
	}
	return -1
}
