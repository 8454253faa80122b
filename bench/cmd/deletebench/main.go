// Command deletebench measures tenant deletion through the deleter plugins
// against each store's plain baseline, in the same run:
//
//   - postgres: tenant A with 1M + 250k + 10k rows in three FK-linked tables
//     (tenant B the same size) vs the three DELETEs in one psql transaction;
//     also the longest single transaction the plugin held (sampled from
//     pg_stat_activity).
//   - redis: tenant A with 600k keys over two patterns in a 1.2M-key keyspace
//     vs `redis-cli --scan --pattern P | xargs redis-cli unlink` and vs a
//     plain SCAN+UNLINK loop.
//   - dynamodb (dynalite): 50k items vs the serial Query + BatchWriteItem loop.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/lifecycled/lifecycled/bench/internal/benchkit"
	"github.com/lifecycled/lifecycled/internal/seed001"
	"github.com/lifecycled/lifecycled/sdk"
)

const (
	tenantA = "11111111-1111-1111-1111-111111111111"
	tenantB = "22222222-2222-2222-2222-222222222222"
)

func main() {
	which := flag.String("store", "all", "postgres, redis, dynamodb or all")
	steps := flag.Int("pg-steps", 1_000_000, "PostgreSQL: steps rows per tenant")
	instances := flag.Int("pg-instances", 250_000, "PostgreSQL: instances rows per tenant")
	defs := flag.Int("pg-definitions", 10_000, "PostgreSQL: definitions rows per tenant")
	batch := flag.Int("pg-batch", 5000, "PostgreSQL: plugin batch_size")
	pgRounds := flag.Int("pg-rounds", 3, "PostgreSQL: alternating baseline/plugin runs; medians are compared")
	keys := flag.Int("redis-keys", 300_000, "Redis: keys per pattern for tenant A")
	scanCount := flag.Int("redis-scan-count", 2000, "Redis: plugin scan_count (the default)")
	redisProcs := flag.Int("redis-gomaxprocs", 1, "Redis: plugin GOMAXPROCS")
	items := flag.Int("dynamo-items", 50_000, "DynamoDB: items for tenant A")
	rtt := flag.Duration("dynamo-rtt", 2*time.Millisecond, "DynamoDB: also run with this round-trip time added by a proxy (0: skip)")
	flag.Parse()
	if *which == "all" || *which == "postgres" {
		pgBench(*steps, *instances, *defs, *batch, max(1, *pgRounds))
	}
	if *which == "all" || *which == "redis" {
		redisBench(*keys, *scanCount, *redisProcs)
	}
	if *which == "all" || *which == "dynamodb" {
		dynamoBench(*items, 0)
		if *rtt > 0 {
			dynamoBench(*items, *rtt)
		}
	}
}

func plugin(name string) string { return filepath.Join(benchkit.Bin(), "lifecycled-plugin-"+name) }

// pluginEnv is the environment the daemon gives plugins by default.
var pluginEnv = []string{"GOMAXPROCS=1"}

func deleteWithPlugin(d sdk.TenantDeleter, tenant string) (int64, time.Duration) {
	var n int64
	took := benchkit.Time(func() {
		resp, err := d.Delete(context.Background(), &sdk.DeleteRequest{TenantID: tenant}, func(int64) {})
		benchkit.Must(err, "plugin delete")
		n = resp.DeletedCount
	})
	return n, took
}

// --- PostgreSQL ---

func pgAdmin() string {
	if v := os.Getenv("LIFECYCLED_TEST_PG"); v != "" {
		return v
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

func pgBench(steps, instances, defs, batch, rounds int) {
	benchkit.Header(fmt.Sprintf("PostgreSQL deleter: %d + %d + %d rows per tenant, two tenants", steps, instances, defs))
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, pgAdmin())
	benchkit.Must(err, "connect to PostgreSQL")
	name := fmt.Sprintf("lcd_bench_%d", time.Now().UnixNano())
	_, err = admin.Exec(ctx, "CREATE DATABASE "+name)
	benchkit.Must(err, "create database")
	defer func() {
		_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		admin.Close(context.Background())
	}()
	u, _ := url.Parse(pgAdmin())
	u.Path = "/" + name
	dsn := u.String()
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
	var baselines, plugins []time.Duration
	for i := 0; i < rounds; i++ {
		if i > 0 {
			seed(tenantA)
			vacuum()
		}
		baselines = append(baselines, baselineRun())
		seed(tenantA)
		vacuum()
		plugins = append(plugins, pluginRun())
	}
	benchkit.Sort(baselines)
	benchkit.Sort(plugins)
	baseline, took := baselines[rounds/2], plugins[rounds/2]
	benchkit.Report(fmt.Sprintf("baseline: 3 DELETEs in one psql transaction, median of %d", rounds), "%v (%s); runs %v", baseline.Round(time.Millisecond), benchkit.Rate(total, baseline), baselines)
	benchkit.Report(fmt.Sprintf("plugin: batches of %d, median of %d", batch, rounds), "%v (%s), %d rows, exact; runs %v", took.Round(time.Millisecond), benchkit.Rate(total, took), total, plugins)
	ratio := took.Seconds() / baseline.Seconds()
	benchkit.Report("ratio plugin/baseline (target <= 1.2)", "%.2fx %s", ratio, verdict(ratio <= 1.2))
	benchkit.Report("longest plugin transaction (target < 1s)", "%v %s (sampled every 5 ms)", longest.Round(time.Millisecond), verdict(longest < time.Second))
}

func verdict(ok bool) string {
	if ok {
		return "meets"
	}
	return "MISSES"
}

// --- Redis ---

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	benchkit.Must(err, "free port")
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func redisBench(perPattern, scanCount, procs int) {
	benchkit.Header(fmt.Sprintf("Redis deleter: tenant A %d keys over 2 patterns in a %d-key keyspace", 2*perPattern, 4*perPattern))
	port := freePort()
	dir, _ := os.MkdirTemp("", "redisbench")
	defer os.RemoveAll(dir)
	srv := exec.Command("redis-server", "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	srv.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	benchkit.Must(srv.Start(), "start redis-server")
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	for i := 0; i < 100; i++ {
		if c.Ping(ctx).Err() == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	seed := func(tenant string) {
		pipe := c.Pipeline()
		for i := 0; i < perPattern; i++ {
			pipe.Set(ctx, fmt.Sprintf("session:%s:%d", tenant, i), "session-data", 0)
			pipe.Set(ctx, fmt.Sprintf("csrf:%s:%d", tenant, i), "token", 0)
			if i%5000 == 4999 {
				_, err := pipe.Exec(ctx)
				benchkit.Must(err, "seed")
			}
		}
		_, err := pipe.Exec(ctx)
		benchkit.Must(err, "seed")
	}
	patterns := []string{"session:%s:*", "csrf:%s:*"}
	left := func(tenant string) int64 {
		var n int64
		for _, p := range patterns {
			iter := c.Scan(ctx, 0, fmt.Sprintf(p, tenant), 10000).Iterator()
			for iter.Next(ctx) {
				n++
			}
		}
		return n
	}
	seed(tenantA)
	seed(tenantB)
	total := int64(2 * perPattern)
	dbsize, _ := c.DBSize(ctx).Result()
	benchkit.Report("seeded", "%d keys in the keyspace", dbsize)

	// Baseline 1: redis-cli --scan | xargs redis-cli unlink.
	cli := benchkit.Time(func() {
		for _, p := range patterns {
			cmd := exec.Command("sh", "-c", fmt.Sprintf("redis-cli -p %d --scan --pattern '%s' | xargs -r redis-cli -p %d unlink > /dev/null",
				port, fmt.Sprintf(p, tenantA), port))
			out, err := cmd.CombinedOutput()
			benchkit.Must(err, "redis-cli baseline: "+string(out))
		}
	})
	if n := left(tenantA); n != 0 {
		benchkit.Must(fmt.Errorf("%d keys left", n), "redis-cli baseline")
	}
	seed(tenantA)

	// Baseline 2: a plain SCAN + UNLINK loop, one connection, no pipelining.
	var plainDeleted int64
	plain := benchkit.Time(func() {
		for _, p := range patterns {
			var cursor uint64
			for {
				keys, next, err := c.Scan(ctx, cursor, fmt.Sprintf(p, tenantA), 1000).Result()
				benchkit.Must(err, "scan")
				if len(keys) > 0 {
					n, err := c.Unlink(ctx, keys...).Result()
					benchkit.Must(err, "unlink")
					plainDeleted += n
				}
				if next == 0 {
					break
				}
				cursor = next
			}
		}
	})
	seed(tenantA)

	p := benchkit.Launch(plugin("redis"), sdk.KindTenantDeleter, fmt.Sprintf("GOMAXPROCS=%d", procs))
	defer p.Kill()
	d := p.Deleter(map[string]any{"addr": addr, "patterns": []any{"session:{tenant}:*", "csrf:{tenant}:*"}, "scan_count": scanCount})
	countTook := benchkit.Time(func() {
		c, err := d.Count(ctx, &sdk.CountRequest{TenantID: tenantA})
		benchkit.Must(err, "count")
		if c.Count != total {
			benchkit.Must(fmt.Errorf("count %d, want %d", c.Count, total), "count")
		}
	})
	// This machine is shared and noisy: take the median of three runs.
	var runs []time.Duration
	var n int64
	for i := 0; i < 3; i++ {
		if i > 0 {
			seed(tenantA)
		}
		var took time.Duration
		n, took = deleteWithPlugin(d, tenantA)
		if n != total || left(tenantA) != 0 || left(tenantB) != total {
			benchkit.Must(fmt.Errorf("deleted %d of %d", n, total), "plugin delete")
		}
		runs = append(runs, took)
	}
	benchkit.Sort(runs)
	took := runs[1]
	rate := float64(n) / took.Seconds()
	benchkit.Report("baseline: redis-cli --scan | xargs redis-cli unlink", "%v (%s)", cli.Round(time.Millisecond), benchkit.Rate(total, cli))
	benchkit.Report("baseline: plain SCAN+UNLINK loop", "%v (%s)", plain.Round(time.Millisecond), benchkit.Rate(plainDeleted, plain))
	benchkit.Report(fmt.Sprintf("plugin (scan_count %d, GOMAXPROCS %d), median of 3", scanCount, procs), "%v (%s), %d keys, exact; runs %v", took.Round(time.Millisecond), benchkit.Rate(n, took), n, runs)
	benchkit.Report("plugin Count (one SCAN pass, no deletes)", "%v", countTook.Round(time.Millisecond))
	benchkit.Report("target >= 300k keys/s", "%.0f keys/s %s", rate, verdict(rate >= 300_000))
	benchkit.Report("target >= 10x redis-cli pipeline", "%.1fx %s", cli.Seconds()/took.Seconds(), verdict(cli.Seconds()/took.Seconds() >= 10))
	benchkit.Report("vs plain SCAN+UNLINK loop", "%.1fx", plain.Seconds()/took.Seconds())
}

// --- DynamoDB (dynalite) ---

// dynamoBench runs against dynalite directly (its single node.js thread is
// then the bottleneck of both sides) and, with rtt > 0, through a proxy that
// adds a round-trip time like a network to the real service.
func dynamoBench(items int, rtt time.Duration) {
	title := fmt.Sprintf("DynamoDB deleter (dynalite): %d items", items)
	if rtt > 0 {
		title += fmt.Sprintf(", %v round trip added", rtt)
	}
	benchkit.Header(title)
	cliPath := filepath.Join(benchkit.Root(), "test", "dynalite", "node_modules", "dynalite", "cli.js")
	port := freePort()
	srv := exec.Command("node", cliPath, "--port", fmt.Sprint(port), "--host", "127.0.0.1", "--createTableMs", "0")
	srv.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	benchkit.Must(srv.Start(), "start dynalite (run make test-deps)")
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", strings.TrimPrefix(endpoint, "http://")); err == nil {
			c.Close()
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if rtt > 0 {
		endpoint = delayingProxy(endpoint, rtt)
	}
	ctx := context.Background()
	c := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("bench", "bench", "")})
	benchkit.Must(seed001.CreateAuditLogTable(ctx, c, "audit_logs"), "create table")
	seed := func(tenant string, n int) {
		sem := make(chan struct{}, 8)
		var wg sync.WaitGroup
		for start := 0; start < n; start += 25 {
			var reqs []types.WriteRequest
			for i := start; i < min(start+25, n); i++ {
				reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
					"tenant_id": &types.AttributeValueMemberS{Value: tenant},
					"log_id":    &types.AttributeValueMemberS{Value: fmt.Sprintf("%09d", i)},
					"action":    &types.AttributeValueMemberS{Value: "login"},
				}}})
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				for len(reqs) > 0 {
					out, err := c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"audit_logs": reqs}})
					benchkit.Must(err, "seed")
					reqs = out.UnprocessedItems["audit_logs"]
				}
			}()
		}
		wg.Wait()
	}
	count := func(tenant string) int64 {
		var n int64
		p := dynamodb.NewQueryPaginator(c, &dynamodb.QueryInput{TableName: aws.String("audit_logs"), KeyConditionExpression: aws.String("tenant_id = :t"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":t": &types.AttributeValueMemberS{Value: tenant}}, Select: types.SelectCount})
		for p.HasMorePages() {
			out, err := p.NextPage(ctx)
			benchkit.Must(err, "count")
			n += int64(out.Count)
		}
		return n
	}
	seed(tenantA, items)
	seed(tenantB, 1000)

	// Baseline: seed 001's serial loop: Query a page of keys, BatchWriteItem
	// them 25 at a time, repeat.
	var baseDeleted int64
	baseline := benchkit.Time(func() {
		p := dynamodb.NewQueryPaginator(c, &dynamodb.QueryInput{TableName: aws.String("audit_logs"), KeyConditionExpression: aws.String("tenant_id = :t"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":t": &types.AttributeValueMemberS{Value: tenantA}},
			ProjectionExpression:      aws.String("tenant_id, log_id")})
		for p.HasMorePages() {
			out, err := p.NextPage(ctx)
			benchkit.Must(err, "query")
			for start := 0; start < len(out.Items); start += 25 {
				var reqs []types.WriteRequest
				for _, it := range out.Items[start:min(start+25, len(out.Items))] {
					reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: it}})
				}
				_, err := c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"audit_logs": reqs}})
				benchkit.Must(err, "batch write")
				baseDeleted += int64(len(reqs))
			}
		}
	})
	if n := count(tenantA); n != 0 {
		benchkit.Must(fmt.Errorf("%d left", n), "baseline")
	}
	seed(tenantA, items)

	p := benchkit.Launch(plugin("dynamodb"), sdk.KindTenantDeleter, pluginEnv...)
	defer p.Kill()
	d := p.Deleter(map[string]any{"table": "audit_logs", "partition_key": "tenant_id", "region": "us-east-1", "endpoint": endpoint,
		"access_key_id": "bench", "secret_access_key": "bench", "concurrency": 8})
	n, took := deleteWithPlugin(d, tenantA)
	if n != int64(items) || count(tenantA) != 0 || count(tenantB) != 1000 {
		benchkit.Must(fmt.Errorf("deleted %d of %d", n, items), "plugin delete")
	}
	benchkit.Report("baseline: serial Query + BatchWriteItem loop", "%v (%s)", baseline.Round(time.Millisecond), benchkit.Rate(baseDeleted, baseline))
	benchkit.Report("plugin (concurrency 8)", "%v (%s), %d items, exact", took.Round(time.Millisecond), benchkit.Rate(n, took), n)
	ratio := baseline.Seconds() / took.Seconds()
	benchkit.Report("speed-up over baseline (target >= 2x)", "%.2fx %s", ratio, verdict(ratio >= 2))
}

// delayingProxy forwards to target after waiting rtt, and returns its URL.
func delayingProxy(target string, rtt time.Duration) string {
	u, _ := url.Parse(target)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 64}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	benchkit.Must(err, "proxy listen")
	go func() {
		_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(rtt)
			rp.ServeHTTP(w, r)
		}))
	}()
	return "http://" + l.Addr().String()
}
