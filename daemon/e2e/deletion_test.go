package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/seed001"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// stores holds the three real stores a tenant's data lives in, and seeds and
// counts it with each store's own client.
type stores struct {
	pgDSN   string
	pg      *pgxpool.Pool
	redis   *testsvc.RedisServer
	rc      *redis.Client
	dynamo  string
	dc      *dynamodb.Client
	pgBatch int
}

func newStores(t *testing.T, persistentRedis bool) *stores {
	ctx := testsvc.Context(t, 2*time.Minute)
	s := newPGStore(t)
	if persistentRedis {
		s.redis = testsvc.RedisPersistent(t)
	} else {
		s.redis = testsvc.Redis(t)
	}
	s.rc = redis.NewClient(&redis.Options{Addr: s.redis.Addr, MaxRetries: -1})
	t.Cleanup(func() { s.rc.Close() })
	s.dynamo = testsvc.Dynalite(t)
	s.dc = dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(s.dynamo),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	require.NoError(t, seed001.CreateAuditLogTable(ctx, s.dc, "audit_logs"))
	return s
}

// newPGStore is the PostgreSQL store alone, for the tests of the postgres
// deleter alone (pgOnly): no Redis server or dynalite is started, and seed
// and remaining leave them out.
func newPGStore(t *testing.T) *stores {
	ctx := testsvc.Context(t, 2*time.Minute)
	s := &stores{pgDSN: testsvc.PGDatabase(t), pgBatch: 1000}
	var err error
	s.pg, err = pgxpool.New(ctx, s.pgDSN)
	require.NoError(t, err)
	t.Cleanup(s.pg.Close)
	_, err = s.pg.Exec(ctx, seed001.WorkflowSchema("uuid"))
	require.NoError(t, err)
	return s
}

// deleters are the [[deleter]] blocks for these stores.
func (s *stores) deleters() string {
	return fmt.Sprintf(`
[deletion]
concurrency = 3
retry_initial_delay = "300ms"
retry_max_delay = "2s"
poll_interval = "100ms"
lease = "2s"

[[deleter]]
name = "postgres:workflows"
plugin = "postgres"
[deleter.config]
dsn = %q
tables = ["workflow_steps", "workflow_instances", "workflow_definitions"]
tenant_column = "tenant_id"
batch_size = %d

[[deleter]]
name = "redis:sessions"
plugin = "redis"
[deleter.config]
addr = %q
patterns = ["session:{tenant}:*", "csrf:{tenant}:*"]

[[deleter]]
name = "dynamodb:audit_logs"
plugin = "dynamodb"
[deleter.config]
table = "audit_logs"
partition_key = "tenant_id"
region = "us-east-1"
endpoint = %q
access_key_id = "test"
secret_access_key = "test"
`, s.pgDSN, s.pgBatch, s.redis.Addr, s.dynamo)
}

type seeded struct{ pg, redis, dynamo int64 }

// seed gives a tenant n workflow instances and steps (one definition per
// ten), n sessions and n csrf keys, and n audit log items.
func (s *stores) seed(t *testing.T, tenant string, n int) seeded {
	ctx := testsvc.Context(t, 2*time.Minute)
	pgRows, err := seed001.SeedWorkflows(ctx, s.pg, tenant, n)
	require.NoError(t, err)
	if s.rc == nil {
		return seeded{pg: pgRows}
	}
	pipe := s.rc.Pipeline()
	for i := 0; i < n; i++ {
		pipe.Set(ctx, fmt.Sprintf("session:%s:%d", tenant, i), "s", 0)
		pipe.Set(ctx, fmt.Sprintf("csrf:%s:%d", tenant, i), "c", 0)
	}
	_, err = pipe.Exec(ctx)
	require.NoError(t, err)
	require.NoError(t, seed001.PutAuditLogs(ctx, s.dc, "audit_logs", tenant, n))
	return seeded{pg: pgRows, redis: int64(2 * n), dynamo: int64(n)}
}

// remaining counts a tenant's data in each store with the store's own client.
func (s *stores) remaining(t *testing.T, tenant string) seeded {
	ctx := testsvc.Context(t, 2*time.Minute)
	var out seeded
	require.NoError(t, s.pg.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM workflow_steps WHERE tenant_id = $1) +
		(SELECT count(*) FROM workflow_instances WHERE tenant_id = $1) +
		(SELECT count(*) FROM workflow_definitions WHERE tenant_id = $1)`, tenant).Scan(&out.pg))
	if s.rc == nil {
		return out
	}
	for _, p := range []string{"session:%s:*", "csrf:%s:*"} {
		keys, err := s.rc.Keys(ctx, fmt.Sprintf(p, tenant)).Result()
		require.NoError(t, err)
		out.redis += int64(len(keys))
	}
	// A Query reads at most 1 MB: count every page.
	pages := dynamodb.NewQueryPaginator(s.dc, &dynamodb.QueryInput{TableName: aws.String("audit_logs"), KeyConditionExpression: aws.String("tenant_id = :t"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": &types.AttributeValueMemberS{Value: tenant}},
		Select:                    types.SelectCount, ConsistentRead: aws.Bool(true)})
	for pages.HasMorePages() {
		q, err := pages.NextPage(ctx)
		require.NoError(t, err)
		out.dynamo += int64(q.Count)
	}
	return out
}

type jobBody struct {
	ID       string `json:"id"`
	TenantID string `json:"tenant_id"`
	Status   string `json:"status"`
	Attempts int    `json:"attempts"`
	Verified bool   `json:"verified"`
	// LastError is why the job is not done.
	LastError string `json:"last_error"`
	Report    struct {
		Succeeded map[string]struct {
			DeletedCount int64 `json:"deleted_count"`
		} `json:"succeeded"`
		Failed []struct {
			Deleter string `json:"deleter"`
			Error   string `json:"error"`
		} `json:"failed"`
	} `json:"report"`
	Deleters []struct {
		Name         string `json:"name"`
		Status       string `json:"status"`
		DeletedCount int64  `json:"deleted_count"`
		Total        *int64 `json:"total"`
		Attempts     int    `json:"attempts"`
	} `json:"deleters"`
}

func waitJob(t *testing.T, d *testsvc.Daemon, tenant, status string, within time.Duration) jobBody {
	t.Helper()
	var j jobBody
	testsvc.Eventually(t, within, func() bool {
		var a apitest.Answer
		apitest.Record(d, &a).Deletion(t.Context(), tenant)
		if a.Code != 200 {
			return false
		}
		require.NoError(t, json.Unmarshal(a.Body, &j))
		return j.Status == status
	}, "job of %s reaches %s (is %s)", tenant, status, j.Status)
	return j
}

func startDeletion(t *testing.T, d *testsvc.Daemon, tenant string) jobBody {
	t.Helper()
	var j jobBody
	apitest.Expect(t, d, 202, &j).RequestDeletion(t.Context(), tenant, nil, adminclient.IdempotencyKey(uuid.NewString()))
	return j
}

func TestTenantErasureAcrossAllStores(t *testing.T) {
	t.Parallel()
	s := newStores(t, false)
	a, b := uuid.NewString(), uuid.NewString()
	seedA, seedB := s.seed(t, a, 200), s.seed(t, b, 150)
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Extra: s.deleters()})
	testsvc.Eventually(t, time.Minute, apitest.Ready(d), "plugins ready")

	var counts struct {
		Counts map[string]int64 `json:"counts"`
		Failed []any            `json:"failed"`
	}
	apitest.Expect(t, d, 200, &counts).Counts(t.Context(), a)
	require.Equal(t, map[string]int64{"postgres:workflows": seedA.pg, "redis:sessions": seedA.redis, "dynamodb:audit_logs": seedA.dynamo}, counts.Counts)
	require.Empty(t, counts.Failed)

	job := startDeletion(t, d, a)
	require.Contains(t, []string{"PENDING", "RUNNING"}, job.Status)
	done := waitJob(t, d, a, "COMPLETED", 2*time.Minute)
	require.True(t, done.Verified)
	require.Empty(t, done.Report.Failed)
	require.Equal(t, seedA.pg, done.Report.Succeeded["postgres:workflows"].DeletedCount)
	require.Equal(t, seedA.redis, done.Report.Succeeded["redis:sessions"].DeletedCount)
	require.Equal(t, seedA.dynamo, done.Report.Succeeded["dynamodb:audit_logs"].DeletedCount)
	require.Equal(t, seeded{}, s.remaining(t, a), "A is gone from every store")
	require.Equal(t, seedB, s.remaining(t, b), "B is untouched")

	out, _, code := d.CLI("tenant", "status", a)
	require.Equal(t, 0, code)
	require.Contains(t, out, "COMPLETED")
	require.Regexp(t, `verified\s+true`, out)

	out, errOut, code := d.CLI("tenant", "delete", b, "--yes", "--wait")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	require.Contains(t, errOut, "postgres:workflows", "plain progress lines off a terminal")
	require.Contains(t, out, "COMPLETED")
	require.Equal(t, seeded{}, s.remaining(t, b))

	require.Contains(t, metrics(t, d), fmt.Sprintf(`lifecycled_deletion_items_deleted_total{deleter="redis:sessions"} %d`, seedA.redis+seedB.redis))
}

func TestPartialFailureRetriesUntilCompleted(t *testing.T) {
	t.Parallel()
	s := newStores(t, true)
	a := uuid.NewString()
	seedA := s.seed(t, a, 100)
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Extra: s.deleters()})
	testsvc.Eventually(t, time.Minute, apitest.Ready(d), "plugins ready")

	s.redis.Stop()
	startDeletion(t, d, a)
	partial := waitJob(t, d, a, "PARTIAL", time.Minute)
	require.Len(t, partial.Report.Failed, 1)
	require.Equal(t, "redis:sessions", partial.Report.Failed[0].Deleter)
	require.Contains(t, partial.Report.Succeeded, "postgres:workflows")
	require.Contains(t, partial.Report.Succeeded, "dynamodb:audit_logs")
	require.Equal(t, seedA.pg, partial.Report.Succeeded["postgres:workflows"].DeletedCount)

	s.redis.Start()
	done := waitJob(t, d, a, "COMPLETED", 2*time.Minute)
	require.True(t, done.Verified)
	require.Greater(t, done.Attempts, 1)
	require.Equal(t, seedA.redis, done.Report.Succeeded["redis:sessions"].DeletedCount, "Redis kept its data across the outage")
	for _, dl := range done.Deleters {
		if dl.Name != "redis:sessions" {
			require.Equal(t, 1, dl.Attempts, "%s ran once: only failed deleters are retried", dl.Name)
		}
	}
	require.Equal(t, seeded{}, s.remaining(t, a))
}

func TestKill9MidJobThenRestartFinishesWithRightCounts(t *testing.T) {
	t.Parallel()
	s := newStores(t, false)
	s.pgBatch = 50 // many short batches: the job takes a while
	a, b := uuid.NewString(), uuid.NewString()
	seedA, seedB := s.seed(t, a, 30000), s.seed(t, b, 100)
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Extra: s.deleters()})
	testsvc.Eventually(t, time.Minute, apitest.Ready(d), "plugins ready")
	startDeletion(t, d, a)
	testsvc.Eventually(t, time.Minute, func() bool {
		left := s.remaining(t, a)
		return left.pg < seedA.pg && left.pg > 0
	}, "deletion under way")
	d.Kill9()
	mid := s.remaining(t, a)
	t.Logf("killed with %+v of %+v left", mid, seedA)
	require.Positive(t, mid.pg, "killed in the middle")

	d.Restarted(t)
	done := waitJob(t, d, a, "COMPLETED", 3*time.Minute)
	require.True(t, done.Verified)
	require.Equal(t, seedA.pg, done.Report.Succeeded["postgres:workflows"].DeletedCount, "exact count across the crash")
	require.Equal(t, seedA.redis, done.Report.Succeeded["redis:sessions"].DeletedCount)
	require.Equal(t, seedA.dynamo, done.Report.Succeeded["dynamodb:audit_logs"].DeletedCount)
	require.Equal(t, seeded{}, s.remaining(t, a))
	require.Equal(t, seedB, s.remaining(t, b), "nothing of B touched")
}

func TestHostileTenantIDsAre400AndDeleteNothing(t *testing.T) {
	t.Parallel()
	s := newStores(t, false)
	a := uuid.NewString()
	seedA := s.seed(t, a, 20)
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Extra: s.deleters()})
	testsvc.Eventually(t, time.Minute, apitest.Ready(d), "plugins ready")
	hostile := []string{"*", "?", "[a-f]*", a[:35] + "?", a[:34] + "*", a + "*", "' OR '1'='1", "%", "..", "", strings.Repeat("a", 10*1024), "not-a-uuid", " " + a}
	for _, id := range hostile {
		for _, call := range []func() (int, []byte){
			func() (int, []byte) { return apitest.Refused(apitest.Client(d).Counts(t.Context(), id))(t) },
			func() (int, []byte) {
				return apitest.Refused(apitest.Client(d).RequestDeletion(t.Context(), id, nil))(t)
			},
		} {
			code, body := call()
			require.Equal(t, 400, code, "%q: %s", id, body)
			require.Contains(t, string(body), "SYS_TENANT_VALIDATION_ERROR")
		}
	}
	require.Equal(t, seedA, s.remaining(t, a), "nothing deleted anywhere")
	code, _ := apitest.Refused(apitest.Client(d).Deletion(t.Context(), a))(t)
	require.Equal(t, 404, code, "no job was created")
}

func TestTwoDaemonsShareOnePostgresStateStore(t *testing.T) {
	t.Parallel()
	s := newStores(t, false)
	state := testsvc.PGDatabase(t)
	// max_jobs counts across both daemons: with the default (4) one daemon
	// can hold every slot, and take the next job first whenever one ends.
	// Above the number of jobs, each daemon claims what its requests wake.
	extra := strings.Replace(s.deleters(), "[deletion]\n", "[deletion]\nmax_jobs = 16\n", 1)
	d1 := testsvc.StartDaemon(t, testsvc.DaemonOptions{State: state, Extra: extra})
	d2 := testsvc.StartDaemon(t, testsvc.DaemonOptions{State: state, Extra: extra})
	for _, d := range []*testsvc.Daemon{d1, d2} {
		testsvc.Eventually(t, time.Minute, apitest.Ready(d), "plugins ready")
	}
	tenants := make([]string, 6)
	seeds := map[string]seeded{}
	for i := range tenants {
		tenants[i] = uuid.NewString()
		seeds[tenants[i]] = s.seed(t, tenants[i], 50)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	first := map[string]jobBody{}
	second := map[string]jobBody{}
	for i, tenant := range tenants {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j1 := startDeletion(t, []*testsvc.Daemon{d1, d2}[i%2], tenant)
			// The other daemon returns the same job while it is active; once
			// it is COMPLETED (the runner can be that fast) a new one starts.
			j2 := startDeletion(t, []*testsvc.Daemon{d1, d2}[(i+1)%2], tenant)
			mu.Lock()
			first[tenant], second[tenant] = j1, j2
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, tenant := range tenants {
		j := waitJob(t, d1, tenant, "COMPLETED", 2*time.Minute)
		require.Equal(t, 1, j.Attempts, "each job ran once")
		for _, dl := range j.Deleters {
			require.Equal(t, 1, dl.Attempts, "%s ran once for %s", dl.Name, tenant)
		}
		want := seeds[tenant].pg
		if first[tenant].ID != second[tenant].ID {
			// The first job had finished (one active job per tenant is a
			// unique index): it deleted everything, the latest found nothing.
			want = 0
		}
		require.Equal(t, want, j.Report.Succeeded["postgres:workflows"].DeletedCount)
		require.Equal(t, seeded{}, s.remaining(t, tenant))
	}
	// Each daemon runs jobs from the shared store: which one claimed the
	// jobs above is a race (one can take all six on a busy machine), so
	// each in turn is left alone with a new job.
	alone := func(runs, stopped *testsvc.Daemon) {
		t.Helper()
		stopped.Signal(syscall.SIGTERM)
		require.Equal(t, 0, stopped.Wait(time.Minute))
		tenant, bystander := uuid.NewString(), uuid.NewString()
		seed := s.seed(t, tenant, 10)
		kept := s.seed(t, bystander, 10)
		startDeletion(t, runs, tenant)
		j := waitJob(t, runs, tenant, "COMPLETED", 2*time.Minute)
		require.Equal(t, seed.pg, j.Report.Succeeded["postgres:workflows"].DeletedCount)
		require.Equal(t, seeded{}, s.remaining(t, tenant))
		require.Equal(t, kept, s.remaining(t, bystander), "another tenant's data is untouched")
		require.Contains(t, runs.Logs(), "deletion attempt finished")
	}
	alone(d1, d2)
	d2.Restarted(t)
	testsvc.Eventually(t, time.Minute, apitest.Ready(d2), "plugins ready")
	alone(d2, d1)
}
