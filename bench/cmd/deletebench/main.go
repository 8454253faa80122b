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
	"net"
	"path/filepath"
	"time"

	"github.com/lifecycled/lifecycled/bench/internal/benchkit"
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
