package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
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
	e.pg, err = pgxpool.New(testsvc.Context(t, time.Minute), e.pgDSN)
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
	_, err := e.pg.Exec(testsvc.Context(t, time.Minute), ddl)
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
		require.NoError(t, seed001.CreateAuditLogTable(testsvc.Context(t, time.Minute), e.dc, name))
	} else {
		_, err := e.dc.CreateTable(testsvc.Context(t, time.Minute), &dynamodb.CreateTableInput{
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
	ctx := testsvc.Context(t, time.Minute)
	pipe := e.rc.Pipeline()
	for _, p := range e.patterns {
		for i := 0; i < n; i++ {
			key := strings.Replace(strings.Replace(p, "{tenant}", tenant, 1), "*", fmt.Sprint(i), 1)
			pipe.Set(ctx, key, fmt.Sprintf("v-%s-%d", tenant, i), 0)
		}
	}
	_, err := pipe.Exec(ctx)
	require.NoError(t, err)
}

// seedItems gives tenant n items in a DynamoDB table (its tenant_id of the
// table's key type, spelled as given).
func (e *estate) seedItems(t *testing.T, table, tenant string, n int) {
	if e.dynTables[table] == types.ScalarAttributeTypeS {
		require.NoError(t, seed001.PutAuditLogs(testsvc.Context(t, time.Minute), e.dc, table, tenant, n))
		return
	}
	for i := 0; i < n; i++ {
		_, err := e.dc.PutItem(testsvc.Context(t, time.Minute), &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
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
