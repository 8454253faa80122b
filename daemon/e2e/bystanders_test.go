package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/seed001"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// estate is the three real stores of one subtest, and a way to read every
// row, key and item in them back, grouped by the tenant it belongs to, with
// each store's own client. What must not change is compared by content
// hash, tenant by tenant, so a row of any tenant that a deletion touched
// (or a tenant nobody thought of) shows up.
type estate struct {
	pgDSN    string
	pg       *pgxpool.Pool
	pgTables []string // tables with a tenant_id column, of any type

	redis    *testsvc.RedisServer
	rc       *redis.Client
	patterns []string // as in the redis deleter's config; "*" seeded as a number
	keyRE    []*regexp.Regexp

	dynamo    string
	dc        *dynamodb.Client
	dynTables map[string]types.ScalarAttributeType // partition key tenant_id of this type
}

func newEstate(t *testing.T) *estate {
	e := &estate{pgDSN: testsvc.PGDatabase(t), dynTables: map[string]types.ScalarAttributeType{}}
	var err error
	e.pg, err = pgxpool.New(context.Background(), e.pgDSN)
	require.NoError(t, err)
	t.Cleanup(e.pg.Close)
	e.redis = testsvc.Redis(t)
	e.rc = redis.NewClient(&redis.Options{Addr: e.redis.Addr})
	t.Cleanup(func() { e.rc.Close() })
	e.dynamo = testsvc.Dynalite(t)
	e.dc = dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(e.dynamo),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	return e
}

func (e *estate) sql(t *testing.T, ddl string, tables ...string) {
	_, err := e.pg.Exec(context.Background(), ddl)
	require.NoError(t, err)
	e.pgTables = append(e.pgTables, tables...)
}

func (e *estate) redisPatterns(patterns ...string) {
	e.patterns = patterns
	for _, p := range patterns {
		prefix, rest, _ := strings.Cut(p, "{tenant}")
		mid := strings.TrimSuffix(rest, "*")
		// Seeded keys end in a number, so the tenant is everything between
		// the prefix and the last separator: greedy, as it must be for a
		// tenant that contains the separator itself.
		e.keyRE = append(e.keyRE, regexp.MustCompile("^"+regexp.QuoteMeta(prefix)+"(.*)"+regexp.QuoteMeta(mid)+"[0-9]+$"))
	}
}

func (e *estate) dynamoTable(t *testing.T, name string, pk types.ScalarAttributeType) {
	if pk == types.ScalarAttributeTypeS {
		require.NoError(t, seed001.CreateAuditLogTable(context.Background(), e.dc, name))
	} else {
		_, err := e.dc.CreateTable(context.Background(), &dynamodb.CreateTableInput{
			TableName: aws.String(name),
			AttributeDefinitions: []types.AttributeDefinition{
				{AttributeName: aws.String("tenant_id"), AttributeType: pk},
				{AttributeName: aws.String("log_id"), AttributeType: types.ScalarAttributeTypeS},
			},
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String("tenant_id"), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String("log_id"), KeyType: types.KeyTypeRange},
			},
			BillingMode: types.BillingModePayPerRequest,
		})
		require.NoError(t, err)
	}
	e.dynTables[name] = pk
}

// seedKeys gives tenant n keys per pattern.
func (e *estate) seedKeys(t *testing.T, tenant string, n int) {
	pipe := e.rc.Pipeline()
	for _, p := range e.patterns {
		for i := 0; i < n; i++ {
			key := strings.Replace(strings.Replace(p, "{tenant}", tenant, 1), "*", fmt.Sprint(i), 1)
			pipe.Set(context.Background(), key, fmt.Sprintf("v-%s-%d", tenant, i), 0)
		}
	}
	_, err := pipe.Exec(context.Background())
	require.NoError(t, err)
}

// seedItems gives tenant n items in a DynamoDB table (its tenant_id of the
// table's key type, spelled as given).
func (e *estate) seedItems(t *testing.T, table, tenant string, n int) {
	if e.dynTables[table] == types.ScalarAttributeTypeS {
		require.NoError(t, seed001.PutAuditLogs(context.Background(), e.dc, table, tenant, n))
		return
	}
	for i := 0; i < n; i++ {
		_, err := e.dc.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
			"tenant_id": &types.AttributeValueMemberN{Value: tenant},
			"log_id":    &types.AttributeValueMemberS{Value: fmt.Sprintf("%08d", i)},
			"action":    &types.AttributeValueMemberS{Value: "login " + tenant},
		}})
		require.NoError(t, err)
	}
}

// holdings is every tenant's data: a content hash and how many rows, keys
// and items, per tenant (as each store spells it).
type holdings struct {
	hash  map[string]string
	count map[string]int
	lines map[string][]string
}

// read reads every row, key and item of the estate.
func (e *estate) read(t *testing.T) holdings {
	ctx := testsvc.Context(t, time.Minute)
	h := holdings{hash: map[string]string{}, count: map[string]int{}, lines: map[string][]string{}}
	add := func(tenant, line string) { h.lines[tenant] = append(h.lines[tenant], line) }
	for _, table := range e.pgTables {
		rows, err := e.pg.Query(ctx, fmt.Sprintf(`SELECT tenant_id::text, t::text FROM %s t`, pgx.Identifier{table}.Sanitize()))
		require.NoError(t, err)
		for rows.Next() {
			var tenant, row string
			require.NoError(t, rows.Scan(&tenant, &row))
			add(tenant, "postgres|"+table+"|"+row)
		}
		require.NoError(t, rows.Err())
	}
	var cursor uint64
	for {
		keys, next, err := e.rc.Scan(ctx, cursor, "*", 1000).Result()
		require.NoError(t, err)
		for _, k := range keys {
			v, err := e.rc.Get(ctx, k).Result()
			require.NoError(t, err)
			tenant := "(unrecognised key)"
			for _, re := range e.keyRE {
				if m := re.FindStringSubmatch(k); m != nil {
					tenant = m[1]
					break
				}
			}
			add(tenant, "redis|"+k+"|"+v)
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	for table := range e.dynTables {
		pages := dynamodb.NewScanPaginator(e.dc, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
		for pages.HasMorePages() {
			out, err := pages.NextPage(ctx)
			require.NoError(t, err)
			for _, item := range out.Items {
				add(attrText(item["tenant_id"]), "dynamodb|"+table+"|"+itemText(item))
			}
		}
	}
	for tenant, lines := range h.lines {
		sort.Strings(lines)
		sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
		h.hash[tenant], h.count[tenant] = hex.EncodeToString(sum[:]), len(lines)
	}
	return h
}

func attrText(v types.AttributeValue) string {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return x.Value
	case *types.AttributeValueMemberN:
		return x.Value
	default:
		return fmt.Sprintf("%T %v", v, v)
	}
}

func itemText(item map[string]types.AttributeValue) string {
	names := make([]string, 0, len(item))
	for n := range item {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s=%T:%s;", n, item[n], attrText(item[n]))
	}
	return b.String()
}

// unchanged asserts that every tenant but the erased one holds exactly what
// it held before, naming bystanders by role in failures.
func unchanged(t *testing.T, before, after holdings, erased string, roles map[string]string) {
	t.Helper()
	for tenant, hash := range before.hash {
		if tenant == erased {
			continue
		}
		role := roles[tenant]
		if role == "" {
			role = "bystander"
		}
		assert.Equal(t, hash, after.hash[tenant], "%s %q changed: %d items before, %d after", role, tenant, before.count[tenant], after.count[tenant])
	}
	for tenant := range after.hash {
		_, ok := before.hash[tenant]
		assert.True(t, ok || tenant == erased, "data of %q appeared", tenant)
	}
}

type apiJob struct {
	ID       string `json:"id"`
	TenantID string `json:"tenant_id"`
	Status   string `json:"status"`
	Attempts int    `json:"attempts"`
	Verified bool   `json:"verified"`
	Report   struct {
		Succeeded map[string]struct {
			DeletedCount int64            `json:"deleted_count"`
			Breakdown    map[string]int64 `json:"breakdown"`
		} `json:"succeeded"`
		Failed []struct {
			Deleter string `json:"deleter"`
			Error   string `json:"error"`
		} `json:"failed"`
		Verification map[string]struct {
			Count     int64            `json:"count"`
			Breakdown map[string]int64 `json:"breakdown"`
		} `json:"verification"`
	} `json:"report"`
	Deleters []struct {
		Name      string           `json:"name"`
		Breakdown map[string]int64 `json:"breakdown"`
	} `json:"deleters"`
}

func (j apiJob) failed() []string {
	var out []string
	for _, f := range j.Report.Failed {
		out = append(out, f.Deleter)
	}
	sort.Strings(out)
	return out
}

func tenantPath(tenant, suffix string) string {
	return "/api/v1/tenants/" + url.PathEscape(tenant) + suffix
}

func startErasure(t *testing.T, d *testsvc.Daemon, tenant string) apiJob {
	t.Helper()
	code, body := d.Do("POST", tenantPath(tenant, "/deletion"), nil, map[string]string{"Idempotency-Key": uuid.NewString()})
	require.Equal(t, 202, code, "%s", body)
	var j apiJob
	require.NoError(t, json.Unmarshal(body, &j))
	return j
}

// settled waits until the tenant's job finished an attempt: COMPLETED, or
// PARTIAL after at least one attempt.
func settled(t *testing.T, d *testsvc.Daemon, tenant string, within time.Duration) apiJob {
	t.Helper()
	var j apiJob
	testsvc.Eventually(t, within, func() bool {
		code, body := d.Do("GET", tenantPath(tenant, "/deletion"), nil, nil)
		if code != 200 {
			return false
		}
		require.NoError(t, json.Unmarshal(body, &j))
		return j.Status == "COMPLETED" || (j.Status == "PARTIAL" && j.Attempts >= 1)
	}, "job of %q finishes an attempt (is %s)", tenant, j.Status)
	return j
}

func plugins(t *testing.T, d *testsvc.Daemon) map[string]struct{ State, LastError string } {
	var pl struct {
		Plugins []struct {
			Name      string `json:"name"`
			State     string `json:"state"`
			LastError string `json:"last_error"`
		} `json:"plugins"`
	}
	d.JSON("GET", "/api/v1/plugins", nil, 200, &pl)
	out := map[string]struct{ State, LastError string }{}
	for _, p := range pl.Plugins {
		out[p.Name] = struct{ State, LastError string }{p.State, p.LastError}
	}
	return out
}

// pluginsSettled waits until no plugin is still starting.
func pluginsSettled(t *testing.T, d *testsvc.Daemon, n int) map[string]struct{ State, LastError string } {
	var pl map[string]struct{ State, LastError string }
	testsvc.Eventually(t, time.Minute, func() bool {
		pl = plugins(t, d)
		if len(pl) != n {
			return false
		}
		for _, p := range pl {
			if p.State == "starting" {
				return false
			}
		}
		return true
	}, "plugins started or failed: %v", pl)
	return pl
}

const deletionTuning = `
[deletion]
concurrency = 4
retry_initial_delay = "300ms"
retry_max_delay = "2s"
poll_interval = "100ms"
lease = "2s"
`

func postgresBlock(name, dsn string, tables ...string) string {
	quoted := make([]string, len(tables))
	for i, t := range tables {
		quoted[i] = fmt.Sprintf("%q", t)
	}
	return fmt.Sprintf(`
[[deleter]]
name = %q
plugin = "postgres"
[deleter.config]
dsn = %q
tables = [%s]
tenant_column = "tenant_id"
batch_size = 7
`, name, dsn, strings.Join(quoted, ", "))
}

func redisBlock(addr string, patterns ...string) string {
	quoted := make([]string, len(patterns))
	for i, p := range patterns {
		quoted[i] = fmt.Sprintf("%q", p)
	}
	return fmt.Sprintf(`
[[deleter]]
name = "redis:sessions"
plugin = "redis"
[deleter.config]
addr = %q
patterns = [%s]
batch_size = 5
`, addr, strings.Join(quoted, ", "))
}

func dynamoBlock(name, table, endpoint string) string {
	return fmt.Sprintf(`
[[deleter]]
name = %q
plugin = "dynamodb"
[deleter.config]
table = %q
partition_key = "tenant_id"
region = "us-east-1"
endpoint = %q
access_key_id = "test"
secret_access_key = "test"
`, name, table, endpoint)
}

// TestErasureLeavesEveryBystanderUnchanged is issue 10's end-to-end proof:
// tenant A is erased from PostgreSQL, Redis and DynamoDB through the real
// daemon and plugins while every other tenant's rows, keys and items are
// checksummed before and after: B (an unrelated UUID), C (A's UUID in upper
// case, stored by the application as a separate string where the store
// allows it), D and E (A with a delimiter suffix, under a permissive
// tenant_id_format), and numeric tenants reached through other spellings.
func TestErasureLeavesEveryBystanderUnchanged(t *testing.T) {
	t.Run("uuid spellings", func(t *testing.T) {
		e := newEstate(t)
		e.sql(t, seed001.WorkflowSchema("uuid")+`
			CREATE TABLE notes (id bigserial PRIMARY KEY, tenant_id text NOT NULL, body text);
			CREATE INDEX ON notes (tenant_id);`,
			"workflow_steps", "workflow_instances", "workflow_definitions", "notes")
		e.redisPatterns("session:{tenant}:*", "csrf:{tenant}:*")
		e.dynamoTable(t, "audit_logs", types.ScalarAttributeTypeS)

		a := uuid.NewString()
		upperA, b := strings.ToUpper(a), uuid.NewString()
		roles := map[string]string{a: "A", b: "B (unrelated UUID)", upperA: "C (A in upper case, a separate string)"}
		ctx := context.Background()
		for tenant, n := range map[string]int{a: 30, b: 20} {
			_, err := seed001.SeedWorkflows(ctx, e.pg, tenant, n)
			require.NoError(t, err)
		}
		// The uuid columns cannot hold C apart from A; the text column,
		// the Redis keys and the DynamoDB string key can.
		for tenant, n := range map[string]int{a: 5, b: 6, upperA: 4} {
			_, err := e.pg.Exec(ctx, `INSERT INTO notes (tenant_id, body) SELECT $1, 'note ' || g FROM generate_series(1, $2) g`, tenant, n)
			require.NoError(t, err)
			e.seedKeys(t, tenant, n+10)
			e.seedItems(t, "audit_logs", tenant, n*5)
		}
		before := e.read(t)
		require.Equal(t, 30*2+3+5+2*15+25, before.count[a])
		require.Equal(t, 4+2*14+20, before.count[upperA])

		d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Extra: deletionTuning +
			postgresBlock("postgres:workflows", e.pgDSN, "workflow_steps", "workflow_instances", "workflow_definitions") +
			postgresBlock("postgres:notes", e.pgDSN, "notes") +
			redisBlock(e.redis.Addr, e.patterns...) +
			dynamoBlock("dynamodb:audit_logs", "audit_logs", e.dynamo)})
		testsvc.Eventually(t, time.Minute, func() bool { code, _ := d.Do("GET", "/readyz", nil, nil); return code == 200 }, "plugins ready")

		// The dry run in the upper-case spelling counts A, per table and
		// pattern, under A's canonical id.
		var counts struct {
			TenantID  string                      `json:"tenant_id"`
			Counts    map[string]int64            `json:"counts"`
			Breakdown map[string]map[string]int64 `json:"breakdown"`
			Total     int64                       `json:"total"`
			Complete  bool                        `json:"complete"`
		}
		raw := d.JSON("GET", tenantPath(upperA, "/counts"), nil, 200, &counts)
		wantBreakdown := map[string]map[string]int64{
			"postgres:workflows":  {"workflow_steps": 30, "workflow_instances": 30, "workflow_definitions": 3},
			"postgres:notes":      {"notes": 5},
			"redis:sessions":      {"session:{tenant}:*": 15, "csrf:{tenant}:*": 15},
			"dynamodb:audit_logs": {"audit_logs": 25},
		}
		require.Equal(t, a, counts.TenantID)
		require.Equal(t, wantBreakdown, counts.Breakdown)
		require.Equal(t, map[string]int64{"postgres:workflows": 63, "postgres:notes": 5, "redis:sessions": 30, "dynamodb:audit_logs": 25}, counts.Counts)
		require.True(t, counts.Complete)
		require.EqualValues(t, before.count[a], counts.Total)

		out, errOut, code := d.CLI("tenant", "count", upperA)
		require.Equal(t, 0, code, "%s\n%s", out, errOut)
		require.Regexp(t, `(?m)^postgres:workflows\s+63\n  workflow_definitions\s+3\n  workflow_instances\s+30\n  workflow_steps\s+30$`, out)
		require.Regexp(t, `(?m)^  session:\{tenant\}:\*\s+15$`, out)
		out, _, code = d.CLI("--format", "json", "tenant", "count", upperA)
		require.Equal(t, 0, code)
		require.JSONEq(t, string(raw), out, "--format json is the API body")

		job := startErasure(t, d, upperA)
		require.Equal(t, a, job.TenantID, "the job is stored under the canonical id")
		done := settled(t, d, upperA, 2*time.Minute)
		require.Equal(t, "COMPLETED", done.Status, "%+v", done.Report.Failed)
		require.True(t, done.Verified)
		require.Equal(t, job.ID, done.ID)
		for name, want := range wantBreakdown {
			got := done.Report.Succeeded[name]
			require.Equal(t, counts.Counts[name], got.DeletedCount, name)
			require.Equal(t, want, got.Breakdown, "%s deleted exactly what was counted, per table and pattern", name)
			zero := map[string]int64{}
			for k := range want {
				zero[k] = 0
			}
			require.Equal(t, zero, done.Report.Verification[name].Breakdown, "%s verified per table and pattern", name)
		}

		after := e.read(t)
		require.Zero(t, after.count[a], "everything of A is gone: %v", after.lines[a])
		unchanged(t, before, after, a, roles)

		out, _, code = d.CLI("tenant", "status", upperA)
		require.Equal(t, 0, code)
		require.Regexp(t, `verified\s+true`, out)
		require.Regexp(t, `(?m)^  notes\s+5$`, out)
		require.Contains(t, out, "VERIFIED")
	})

	t.Run("delimiter suffix with safe patterns", func(t *testing.T) {
		e, d, a, roles, before := delimiterEstate(t, "session|{tenant}|*", "feed/{tenant}/*")
		pluginsSettled(t, d, 3)
		startErasure(t, d, a)
		done := settled(t, d, a, 2*time.Minute)
		after := e.read(t)
		unchanged(t, before, after, a, roles)
		require.Equal(t, "COMPLETED", done.Status, "%+v", done.Report.Failed)
		require.True(t, done.Verified)
		require.Zero(t, after.count[a], "everything of A is gone: %v", after.lines[a])
	})

	// Needs the Redis plugin's refusal (issue 10 case 6): with a format
	// that allows ':' and '.', deleting "acme" with session:{tenant}:*
	// would also match every key of "acme:eu".
	t.Run("delimiter suffix with patterns that confuse tenants", func(t *testing.T) {
		e, d, a, roles, before := delimiterEstate(t, "session:{tenant}:*", "feed.{tenant}.*")
		pl := pluginsSettled(t, d, 3)
		startErasure(t, d, a)
		done := settled(t, d, a, 2*time.Minute)
		after := e.read(t)
		unchanged(t, before, after, a, roles)
		assert.NotEqual(t, "running", pl["redis:sessions"].State, "the Redis deleter refuses the patterns at Configure")
		assert.Contains(t, pl["redis:sessions"].LastError, "session:{tenant}:*", "the refusal names the pattern")
		assert.Equal(t, "PARTIAL", done.Status, "a deleter that cannot run leaves the job unfinished")
		assert.False(t, done.Verified)
		assert.Contains(t, done.failed(), "redis:sessions")
	})

	// Needs the numeric key checks of the PostgreSQL and DynamoDB plugins
	// (issue 10 case 5): with a tenant_id_format sloppy enough to admit
	// them, other spellings of a number must delete nothing of the tenant
	// that number is.
	t.Run("numeric spellings", func(t *testing.T) {
		e := newEstate(t)
		e.sql(t, `CREATE TABLE accounts (id bigserial PRIMARY KEY, tenant_id bigint NOT NULL, name text);
			CREATE INDEX ON accounts (tenant_id);`, "accounts")
		e.redisPatterns("acct/{tenant}/*")
		e.dynamoTable(t, "events", types.ScalarAttributeTypeN)
		ctx := context.Background()
		// Each spelling below is another spelling of its own bystander, so
		// that what one spelling did is not hidden by another.
		for tenant, n := range map[string]int{"7": 5, "70": 3, "4": 6, "5": 2, "6": 3, "8": 4, "1000": 4, "2000": 2} {
			_, err := e.pg.Exec(ctx, `INSERT INTO accounts (tenant_id, name) SELECT $1::bigint, 'acct ' || g FROM generate_series(1, $2) g`, tenant, n)
			require.NoError(t, err)
			e.seedKeys(t, tenant, n)
			e.seedItems(t, "events", tenant, n)
		}
		before := e.read(t)
		roles := map[string]string{"70": "numeric tenant 70 (7 with a digit more)"}
		for _, n := range []string{"4", "5", "6", "8", "1000", "2000"} {
			roles[n] = "numeric tenant " + n
		}
		d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Daemon: `tenant_id_format = "^[-+ .0-9a-z]{1,20}$"`,
			Extra: deletionTuning + postgresBlock("postgres:accounts", e.pgDSN, "accounts") +
				redisBlock(e.redis.Addr, e.patterns...) + dynamoBlock("dynamodb:events", "events", e.dynamo)})
		pluginsSettled(t, d, 3)

		t.Run("the canonical spelling", func(t *testing.T) {
			startErasure(t, d, "7")
			done := settled(t, d, "7", 2*time.Minute)
			after := e.read(t)
			unchanged(t, before, after, "7", roles)
			require.Equal(t, "COMPLETED", done.Status, "%+v", done.Report.Failed)
			require.True(t, done.Verified)
			require.Zero(t, after.count["7"])
			before = after
		})
		for _, spelling := range []string{" 4", "+5", "06", "8.0", "1e3", "2000.0"} {
			t.Run(fmt.Sprintf("%q", spelling), func(t *testing.T) {
				prior := e.read(t) // what an earlier spelling did is that spelling's failure
				startErasure(t, d, spelling)
				done := settled(t, d, spelling, time.Minute)
				unchanged(t, prior, e.read(t), "", roles)
				assert.NotEqual(t, "COMPLETED", done.Status, "a store that would read %q as another number refuses it", spelling)
				assert.Subset(t, done.failed(), []string{"dynamodb:events", "postgres:accounts"}, "both numeric stores refuse %q", spelling)
			})
		}
		// The refused jobs are retried with backoff: still nothing of anyone.
		time.Sleep(time.Second)
		unchanged(t, before, e.read(t), "", roles)
	})
}

// delimiterEstate seeds A = "acme" and bystanders that extend it with a
// delimiter (D "acme:eu", E "acme.eu") or not (B "globex"), under a
// permissive tenant_id_format that allows both delimiters, and starts a
// daemon whose Redis deleter uses patterns.
func delimiterEstate(t *testing.T, patterns ...string) (*estate, *testsvc.Daemon, string, map[string]string, holdings) {
	e := newEstate(t)
	e.sql(t, `CREATE TABLE notes (id bigserial PRIMARY KEY, tenant_id text NOT NULL, body text);
		CREATE INDEX ON notes (tenant_id);`, "notes")
	e.redisPatterns(patterns...)
	e.dynamoTable(t, "audit_logs", types.ScalarAttributeTypeS)
	const a = "acme"
	roles := map[string]string{"globex": "B (unrelated)", "acme:eu": "D (A + ':' suffix)", "acme.eu": "E (A + '.' suffix)"}
	for tenant, n := range map[string]int{a: 5, "globex": 3, "acme:eu": 4, "acme.eu": 6} {
		_, err := e.pg.Exec(context.Background(), `INSERT INTO notes (tenant_id, body) SELECT $1, 'note ' || g FROM generate_series(1, $2) g`, tenant, n)
		require.NoError(t, err)
		e.seedKeys(t, tenant, n)
		e.seedItems(t, "audit_logs", tenant, n)
	}
	before := e.read(t)
	for _, tenant := range []string{a, "globex", "acme:eu", "acme.eu"} {
		require.Positive(t, before.count[tenant], tenant)
	}
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Daemon: `tenant_id_format = "^[a-z0-9:._-]{1,64}$"`,
		Extra: deletionTuning + postgresBlock("postgres:notes", e.pgDSN, "notes") +
			redisBlock(e.redis.Addr, e.patterns...) + dynamoBlock("dynamodb:audit_logs", "audit_logs", e.dynamo)})
	return e, d, a, roles, before
}
