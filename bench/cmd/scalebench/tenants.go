package main

import (
	"context"
	"database/sql"
	"fmt"
	"net"
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
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/lifecycled/lifecycled/bench/internal/benchkit"
	"github.com/lifecycled/lifecycled/daemon/wire"
	"github.com/lifecycled/lifecycled/internal/seed001"
)

// Per tenant: rows, keys and items in each store. Small tenants: the
// cost measured is the erasure's per-tenant work, not the deletion's bulk.
const (
	pgRows     = 10
	mysqlRows  = 3
	redisKeys  = 6
	dynamoRows = 2
	// kept tenants are in every store beside the erased ones and must stay
	// whole.
	kept = 500
)

// stores are the bundled deleters' stores, each of its own for this run.
type stores struct {
	use map[string]bool

	pgDSN  string
	pgDrop func()
	pg     *pgxpool.Pool

	myDSN, myName string
	my            *sql.DB

	redisSrv *exec.Cmd
	redisDir string
	redis    *redis.Client

	dynSrv      *exec.Cmd
	dynEndpoint string
	dyn         *dynamodb.Client
}

// Tenant ids are UUIDs (the daemon's default tenant_id_format), the erased
// ones and the kept ones each with a prefix of their own, which the
// checks count by.
const (
	erasedPrefix = "00000000-"
	keptPrefix   = "11111111-"
)

func erased(i int) string { return fmt.Sprintf(erasedPrefix+"0000-4000-8000-%012d", i) }
func keptID(i int) string { return fmt.Sprintf(keptPrefix+"0000-4000-8000-%012d", i) }

// startStores starts (or makes a database on) each store named and puts n
// erased and the kept tenants in it.
func startStores(names []string, n int) *stores {
	st := &stores{use: map[string]bool{}}
	for _, name := range names {
		st.use[strings.TrimSpace(name)] = true
	}
	ctx := context.Background()
	var tenants []string
	for i := 0; i < n; i++ {
		tenants = append(tenants, erased(i))
	}
	for i := 0; i < kept; i++ {
		tenants = append(tenants, keptID(i))
	}
	took := benchkit.Time(func() {
		if st.use["postgres"] {
			st.pgDSN, st.pgDrop = benchkit.TempDatabase(ctx, benchkit.PGAdmin(), "lcd_scalebench_app")
			var err error
			st.pg, err = pgxpool.New(ctx, st.pgDSN)
			benchkit.Must(err, "connect app")
			_, err = st.pg.Exec(ctx, `CREATE TABLE orders (id bigserial PRIMARY KEY, tenant_id text NOT NULL, payload text NOT NULL);
				CREATE INDEX ON orders (tenant_id)`)
			benchkit.Must(err, "app schema")
			_, err = st.pg.Exec(ctx, `INSERT INTO orders (tenant_id, payload) SELECT t, repeat('x', 100) FROM unnest($1::text[]) t,
				generate_series(1, $2) ORDER BY random()`, tenants, pgRows)
			benchkit.Must(err, "app rows")
			_, err = st.pg.Exec(ctx, `VACUUM ANALYZE orders`)
			benchkit.Must(err, "app rows")
		}
		if st.use["mysql"] {
			st.startMySQL(tenants)
		}
		if st.use["redis"] {
			st.startRedis(tenants)
		}
		if st.use["dynamodb"] {
			st.startDynamo(tenants)
		}
	})
	benchkit.Report(fmt.Sprintf("stores: %d tenants to erase, %d kept, in %s", n, kept, strings.Join(names, ", ")), "seeded in %v", took.Round(time.Second))
	return st
}

func (st *stores) startMySQL(tenants []string) {
	admin := os.Getenv("LIFECYCLED_TEST_MYSQL")
	if admin == "" {
		admin = "root@tcp(127.0.0.1:3306)/"
	}
	db, err := sql.Open("mysql", admin)
	benchkit.Must(err, "mysql DSN")
	st.myName = fmt.Sprintf("lcd_scalebench_%d", time.Now().UnixNano())
	_, err = db.Exec("CREATE DATABASE " + st.myName + " CHARACTER SET utf8mb4")
	benchkit.Must(err, "create the MySQL database (run make test-deps, or set LIFECYCLED_TEST_MYSQL)")
	db.Close()
	cfg, err := mysql.ParseDSN(admin)
	benchkit.Must(err, "mysql DSN")
	cfg.DBName = st.myName
	st.myDSN = cfg.FormatDSN()
	st.my, err = sql.Open("mysql", st.myDSN)
	benchkit.Must(err, "connect mysql")
	_, err = st.my.Exec(`CREATE TABLE customers (id BIGINT AUTO_INCREMENT PRIMARY KEY, tenant_id VARCHAR(64) NOT NULL,
		name VARCHAR(100) NOT NULL, KEY (tenant_id)) ENGINE=InnoDB`)
	benchkit.Must(err, "mysql schema")
	for start := 0; start < len(tenants); start += 1000 {
		var b strings.Builder
		b.WriteString("INSERT INTO customers (tenant_id, name) VALUES ")
		for i, t := range tenants[start:min(start+1000, len(tenants))] {
			for r := 0; r < mysqlRows; r++ {
				if i > 0 || r > 0 {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, "('%s', 'customer %d')", t, r)
			}
		}
		_, err := st.my.Exec(b.String())
		benchkit.Must(err, "mysql rows")
	}
}

func (st *stores) startRedis(tenants []string) {
	port := freePort()
	st.redisDir, _ = os.MkdirTemp("", "scaleb-redis")
	st.redisSrv = exec.Command("redis-server", "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", st.redisDir)
	st.redisSrv.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	benchkit.Must(st.redisSrv.Start(), "start redis-server (run make test-deps)")
	st.redis = redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	ctx := context.Background()
	for i := 0; i < 100 && st.redis.Ping(ctx).Err() != nil; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	pipe := st.redis.Pipeline()
	for i, t := range tenants {
		for k := 0; k < redisKeys-1; k++ {
			pipe.Set(ctx, fmt.Sprintf("session:%s:%d", t, k), "session-data", 0)
		}
		pipe.Set(ctx, fmt.Sprintf("csrf:%s:0", t), "token", 0)
		if i%1000 == 999 {
			_, err := pipe.Exec(ctx)
			benchkit.Must(err, "redis keys")
		}
	}
	_, err := pipe.Exec(ctx)
	benchkit.Must(err, "redis keys")
}

func (st *stores) startDynamo(tenants []string) {
	cli := filepath.Join(benchkit.Root(), "test", "dynalite", "node_modules", "dynalite", "cli.js")
	port := freePort()
	st.dynSrv = exec.Command("node", cli, "--port", fmt.Sprint(port), "--host", "127.0.0.1", "--createTableMs", "0")
	st.dynSrv.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	benchkit.Must(st.dynSrv.Start(), "start dynalite (run make test-deps)")
	st.dynEndpoint = fmt.Sprintf("http://127.0.0.1:%d", port)
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	st.dyn = dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(st.dynEndpoint),
		Credentials: credentials.NewStaticCredentialsProvider("bench", "bench", "")})
	ctx := context.Background()
	err := seed001.CreateAuditLogTable(ctx, st.dyn, "audit_logs")
	benchkit.Must(err, "create table")
	var reqs []types.WriteRequest
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	flush := func() {
		batch := reqs
		reqs = nil
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			for len(batch) > 0 {
				out, err := st.dyn.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"audit_logs": batch}})
				benchkit.Must(err, "dynamodb items")
				batch = out.UnprocessedItems["audit_logs"]
			}
		}()
	}
	for _, t := range tenants {
		for r := 0; r < dynamoRows; r++ {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
				"tenant_id": &types.AttributeValueMemberS{Value: t},
				"log_id":    &types.AttributeValueMemberS{Value: fmt.Sprintf("%04d", r)},
				"action":    &types.AttributeValueMemberS{Value: "login"},
			}}})
			if len(reqs) == 25 {
				flush()
			}
		}
	}
	if len(reqs) > 0 {
		flush()
	}
	wg.Wait()
}

// deleters are the [[deleter]] blocks of the stores.
func (st *stores) deleters() string {
	var b strings.Builder
	if st.use["postgres"] {
		fmt.Fprintf(&b, "[[deleter]]\nname = \"postgres:orders\"\nplugin = \"postgres\"\n[deleter.config]\ndsn = %q\ntables = [\"orders\"]\ntenant_column = \"tenant_id\"\n", st.pgDSN)
	}
	if st.use["mysql"] {
		fmt.Fprintf(&b, "[[deleter]]\nname = \"mysql:customers\"\nplugin = \"mysql\"\n[deleter.config]\ndsn = %q\ntables = [\"customers\"]\ntenant_column = \"tenant_id\"\n", st.myDSN)
	}
	if st.use["redis"] {
		fmt.Fprintf(&b, "[[deleter]]\nname = \"redis:sessions\"\nplugin = \"redis\"\n[deleter.config]\naddr = %q\npatterns = [\"session:{tenant}:*\", \"csrf:{tenant}:*\"]\n", st.redis.Options().Addr)
	}
	if st.use["dynamodb"] {
		fmt.Fprintf(&b, "[[deleter]]\nname = \"dynamodb:audit_logs\"\nplugin = \"dynamodb\"\n[deleter.config]\ntable = \"audit_logs\"\npartition_key = \"tenant_id\"\nregion = \"us-east-1\"\nendpoint = %q\naccess_key_id = \"bench\"\nsecret_access_key = \"bench\"\n", st.dynEndpoint)
	}
	return b.String()
}

// left counts what each store still holds of the tenants with prefix.
func (st *stores) left(prefix string) map[string]int64 {
	ctx := context.Background()
	out := map[string]int64{}
	if st.use["postgres"] {
		var n int64
		benchkit.Must(st.pg.QueryRow(ctx, `SELECT count(*) FROM orders WHERE tenant_id LIKE $1 || '%'`, prefix).Scan(&n), "count postgres")
		out["postgres"] = n
	}
	if st.use["mysql"] {
		var n int64
		benchkit.Must(st.my.QueryRow(`SELECT count(*) FROM customers WHERE tenant_id LIKE CONCAT(?, '%')`, prefix).Scan(&n), "count mysql")
		out["mysql"] = n
	}
	if st.use["redis"] {
		var n int64
		for _, p := range []string{"session:" + prefix + "*", "csrf:" + prefix + "*"} {
			iter := st.redis.Scan(ctx, 0, p, 10000).Iterator()
			for iter.Next(ctx) {
				n++
			}
			benchkit.Must(iter.Err(), "count redis")
		}
		out["redis"] = n
	}
	if st.use["dynamodb"] {
		var n int64
		p := dynamodb.NewScanPaginator(st.dyn, &dynamodb.ScanInput{TableName: aws.String("audit_logs"), Select: types.SelectCount,
			FilterExpression:          aws.String("begins_with(tenant_id, :p)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: prefix}}})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			benchkit.Must(err, "count dynamodb")
			n += int64(page.Count)
		}
		out["dynamodb"] = n
	}
	return out
}

func (st *stores) stop() {
	if st.pg != nil {
		st.pg.Close()
		st.pgDrop()
	}
	if st.my != nil {
		_, _ = st.my.Exec("DROP DATABASE IF EXISTS " + st.myName)
		st.my.Close()
	}
	if st.redisSrv != nil {
		_ = st.redisSrv.Process.Kill()
		_ = st.redisSrv.Wait()
		os.RemoveAll(st.redisDir)
	}
	if st.dynSrv != nil {
		_ = st.dynSrv.Process.Kill()
		_ = st.dynSrv.Wait()
	}
}

// eraseAll queues the erasure of every erased tenant in bulk requests and
// waits until each job is COMPLETED, reporting the rate of each quarter
// of the run and the state store's growth.
func eraseAll(d *daemon, st *stores, n int) {
	ctx := context.Background()
	fmt.Printf("\n-- erasure of %d tenants\n", n)
	perStore := map[string]int64{"postgres": pgRows, "mysql": mysqlRows, "redis": redisKeys, "dynamodb": dynamoRows}
	keptBefore := st.left(keptPrefix)
	for name, got := range keptBefore {
		if got != kept*perStore[name] {
			benchkit.Must(fmt.Errorf("%s holds %d of the kept tenants' %d", name, got, kept*perStore[name]), "seed")
		}
	}
	lifecycle := `SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
		WHERE s.nspname = 'lifecycle' AND c.relkind = 'r'`
	before := d.count(lifecycle)
	start := time.Now()
	for first := 0; first < n; first += 10_000 {
		var ids []string
		for i := first; i < min(first+10_000, n); i++ {
			ids = append(ids, erased(i))
		}
		res, err := d.API.RequestDeletions(ctx, wire.BulkRequest{TenantIDs: ids})
		benchkit.Must(err, "bulk deletion request")
		if res.Queued != len(ids) {
			benchkit.Must(fmt.Errorf("queued %d of %d", res.Queued, len(ids)), "bulk deletion request")
		}
	}
	queued := time.Since(start)
	var marks []time.Duration
	var peak int64
	const poll = 500 * time.Millisecond
	for quarter := 1; quarter <= 4; {
		done := d.count(`SELECT count(*) FROM lifecycle.deletion_jobs WHERE status = 'COMPLETED'`)
		for quarter <= 4 && done >= int64(n*quarter/4) {
			marks = append(marks, time.Since(start))
			quarter++
		}
		if stuck := d.count(`SELECT count(*) FROM lifecycle.deletion_jobs WHERE status IN ('BLOCKED', 'CANCELLED')`); stuck > 0 {
			benchkit.Must(fmt.Errorf("%d jobs BLOCKED or CANCELLED", stuck), "erasure")
		}
		if rss := benchkit.ProcStatus(d.Cmd.Process.Pid, "VmRSS"); rss > peak {
			peak = rss
		}
		time.Sleep(poll)
	}
	total := marks[3]
	benchkit.Report(fmt.Sprintf("erasure of %d tenants (bulk request %v)", n, queued.Round(time.Millisecond)), "%v (%s)", total.Round(time.Second), benchkit.Rate(int64(n), total))
	prev := time.Duration(0)
	for q, m := range marks {
		if m-prev < poll {
			// Passed in the same poll as the quarter before: no rate of its own.
			benchkit.Report(fmt.Sprintf("  quarter %d", q+1), "within one %v poll of quarter %d", poll, q)
		} else {
			benchkit.Report(fmt.Sprintf("  quarter %d", q+1), "%s", benchkit.Rate(int64(n/4), m-prev))
		}
		prev = m
	}
	verified := d.count(`SELECT count(*) FROM lifecycle.deletion_jobs WHERE status = 'COMPLETED' AND verified`)
	ledger := d.count(`SELECT count(*) FROM lifecycle.erasure_ledger`)
	after := d.count(lifecycle)
	benchkit.Report("  verified, in the ledger", "%d verified, %d ledger rows", verified, ledger)
	benchkit.Report("  state store growth (schema lifecycle)", "%s to %s: %d bytes per tenant", mb(before), mb(after), (after-before)/int64(n))
	benchkit.Report("  daemon RSS", "peak during the erasure %d MB; now %s", peak/1024, d.rss())
	for name, got := range st.left(erasedPrefix) {
		if got != 0 {
			benchkit.Must(fmt.Errorf("%s still holds %d of the erased tenants'", name, got), "erasure invariant")
		}
	}
	for name, got := range st.left(keptPrefix) {
		if got != keptBefore[name] {
			benchkit.Must(fmt.Errorf("%s holds %d of the kept tenants', %d before", name, got, keptBefore[name]), "erasure invariant")
		}
	}
	benchkit.Report("  every store", "erased tenants gone, the %d kept whole", kept)
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	benchkit.Must(err, "free port")
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
