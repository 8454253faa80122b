package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http/httptest"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/seed001"
	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest"
)

func TestComputeBackoff(t *testing.T) {
	t.Parallel()
	// Seed 000's four cases.
	require.Equal(t, 100*time.Millisecond, computeBackoff(0))
	require.Equal(t, 200*time.Millisecond, computeBackoff(1))
	require.Equal(t, 1600*time.Millisecond, computeBackoff(4))
	require.Equal(t, 5000*time.Millisecond, computeBackoff(10))
}

func newClient(t testing.TB, endpoint string) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
}

func createTable(t testing.TB, c *dynamodb.Client, name string) {
	require.NoError(t, seed001.CreateAuditLogTable(testsvc.Context(t, time.Minute), c, name))
}

// fixture seeds and reads a table whose partition key tenant_id is of
// keyType (S or N), with the DynamoDB client.
type fixture struct {
	endpoint string
	c        *dynamodb.Client
	table    string
	keyType  types.ScalarAttributeType
	// proxy, when set, stands between the plugin and dynalite, for the
	// kit's outage checks.
	proxy *outageProxy
}

// pluginEndpoint is where the plugin reaches dynalite.
func (f *fixture) pluginEndpoint() string {
	if f.proxy != nil {
		return f.proxy.srv.URL
	}
	return f.endpoint
}

// The secret key is not checked by dynalite; the kit checks it never shows.
func (f *fixture) Config(testing.TB) map[string]any {
	return map[string]any{"table": f.table, "partition_key": "tenant_id", "region": "us-east-1", "endpoint": f.pluginEndpoint(),
		"access_key_id": "kit-access-key-id", "secret_access_key": "kit-secret-key-8812", "concurrency": 4}
}

func (f *fixture) StopStore(testing.TB)  { f.proxy.setDown(true) }
func (f *fixture) StartStore(testing.TB) { f.proxy.setDown(false) }

// UnreachableConfig points at a port nothing listens on.
func (f *fixture) UnreachableConfig(t testing.TB) (map[string]any, string) {
	cfg := f.Config(t)
	cfg["endpoint"] = fmt.Sprintf("http://127.0.0.1:%d", testsvc.FreePort(t))
	return cfg, "endpoint"
}

// withProxy routes the plugin through an outageProxy.
func (f *fixture) withProxy(t testing.TB) *fixture {
	f.proxy = &outageProxy{target: f.endpoint}
	f.proxy.srv = httptest.NewServer(f.proxy)
	t.Cleanup(f.proxy.srv.Close)
	return f
}

func (f *fixture) key(tenant string) types.AttributeValue {
	if f.keyType == types.ScalarAttributeTypeN {
		return &types.AttributeValueMemberN{Value: tenant}
	}
	return &types.AttributeValueMemberS{Value: tenant}
}

func (f *fixture) Seed(t testing.TB, tenant string, n int) int64 {
	if f.keyType != types.ScalarAttributeTypeN {
		require.NoError(t, seed001.PutAuditLogs(testsvc.Context(t, time.Minute), f.c, f.table, tenant, n))
		return int64(n)
	}
	ctx := testsvc.Context(t, 2*time.Minute)
	for start := 0; start < n; start += 25 {
		var reqs []types.WriteRequest
		for i := start; i < min(start+25, n); i++ {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
				"tenant_id": f.key(tenant),
				"log_id":    &types.AttributeValueMemberS{Value: fmt.Sprintf("%08d", i)},
				"action":    &types.AttributeValueMemberS{Value: "login of " + tenant},
			}}})
		}
		for len(reqs) > 0 {
			out, err := f.c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{f.table: reqs}})
			require.NoError(t, err)
			reqs = out.UnprocessedItems[f.table]
		}
	}
	return int64(n)
}

func (f *fixture) query(t testing.TB, tenant string, count bool) (int64, []map[string]types.AttributeValue) {
	in := &dynamodb.QueryInput{
		TableName: aws.String(f.table), KeyConditionExpression: aws.String("tenant_id = :t"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": f.key(tenant)},
		ConsistentRead:            aws.Bool(true),
	}
	if count {
		in.Select = types.SelectCount
	}
	var n int64
	var items []map[string]types.AttributeValue
	p := dynamodb.NewQueryPaginator(f.c, in)
	for p.HasMorePages() {
		out, err := p.NextPage(testsvc.Context(t, time.Minute))
		require.NoError(t, err)
		n += int64(out.Count)
		items = append(items, out.Items...)
	}
	return n, items
}

func (f *fixture) Remaining(t testing.TB, tenant string) int64 {
	if tenant == "" {
		return 0
	}
	n, _ := f.query(t, tenant, true)
	return n
}

// Checksum hashes every attribute of every item of the tenant.
func (f *fixture) Checksum(t testing.TB, tenant string) string {
	_, items := f.query(t, tenant, false)
	lines := make([]string, len(items))
	for i, item := range items {
		names := make([]string, 0, len(item))
		for name := range item {
			names = append(names, name)
		}
		sort.Strings(names)
		var b strings.Builder
		for _, name := range names {
			fmt.Fprintf(&b, "%q=%s;", name, attrText(item[name]))
		}
		lines[i] = b.String()
	}
	sort.Strings(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(sum[:])
}

func attrText(v types.AttributeValue) string {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return "S:" + strconv.Quote(x.Value)
	case *types.AttributeValueMemberN:
		return "N:" + x.Value
	case *types.AttributeValueMemberB:
		return "B:" + hex.EncodeToString(x.Value)
	default:
		return fmt.Sprintf("%T:%v", v, v)
	}
}

// canonicalNumberRE is the text DynamoDB gives a number back in: a numeric
// key stores only ids written so as a tenant of their own ("04" is 4).
var canonicalNumberRE = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]*[1-9])?$`)

// StoresDistinct: a string key keeps every id apart; a numeric one only
// the canonical text of a number.
func (f *fixture) StoresDistinct(id string) bool {
	return f.keyType != types.ScalarAttributeTypeN || (canonicalNumberRE.MatchString(id) && id != "-0")
}

func binary(t testing.TB) string { return testsvc.Binary(t, "lifecycled-plugin-dynamodb") }

func setup(t testing.TB) *fixture {
	endpoint := testsvc.Dynalite(t)
	c := newClient(t, endpoint)
	createTable(t, c, "audit_logs")
	return &fixture{endpoint: endpoint, c: c, table: "audit_logs", keyType: types.ScalarAttributeTypeS}
}

// setupNumeric creates a table whose partition key tenant_id is a number.
func setupNumeric(t testing.TB) *fixture {
	endpoint := testsvc.Dynalite(t)
	c := newClient(t, endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String("org_events"),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("tenant_id"), AttributeType: types.ScalarAttributeTypeN},
			{AttributeName: aws.String("log_id"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("tenant_id"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("log_id"), KeyType: types.KeyTypeRange},
		},
		BillingMode: types.BillingModePayPerRequest,
	})
	require.NoError(t, err)
	require.NoError(t, dynamodb.NewTableExistsWaiter(c, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 50 * time.Millisecond
	}).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("org_events")}, time.Minute))
	return &fixture{endpoint: endpoint, c: c, table: "org_events", keyType: types.ScalarAttributeTypeN}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	// With UUIDs; and with a format that accepts nearly anything, so that
	// the kit seeds bystanders like A+":x", " "+A and A in upper case, and
	// sends hostile ids the plugin must treat as data.
	for name, format := range map[string]string{"uuid": "uuid", "permissive": `^.{1,200}$`} {
		t.Run(name, func(t *testing.T) {
			f := setup(t).withProxy(t)
			plugintest.RunTenantDeleter(t, plugintest.DeleterOptions{
				Binary:          binary(t),
				Fixture:         f,
				TenantIDFormat:  format,
				BadConfigs:      badConfigs(f.endpoint, f.table),
				BadConfigFields: badConfigFields,
				Seed:            60,
				CancelSeed:      3000,
			})
		})
	}
}

// badConfigs are configs Configure must refuse (table is one that exists,
// so that only its key is wrong), each naming the field in
// badConfigFields. Every kit run needs them: under CI=true the kit fails a
// check it cannot run.
func badConfigs(endpoint, table string) map[string]map[string]any {
	return map[string]map[string]any{
		"missing table":    {"partition_key": "tenant_id", "region": "us-east-1", "endpoint": endpoint},
		"wrong key":        {"table": table, "partition_key": "org_id", "region": "us-east-1", "endpoint": endpoint, "access_key_id": "a", "secret_access_key": "b"},
		"half credentials": {"table": "audit_logs", "partition_key": "tenant_id", "region": "us-east-1", "access_key_id": "a"},
		"bad concurrency":  {"table": "audit_logs", "partition_key": "tenant_id", "region": "us-east-1", "concurrency": 0},
		"unknown key":      {"table": "audit_logs", "partition_key": "tenant_id", "region": "us-east-1", "tabel": "x"},
	}
}

var badConfigFields = map[string]string{
	"missing table": "table", "wrong key": "partition_key", "half credentials": "access_key_id",
	"bad concurrency": "concurrency", "unknown key": "tabel",
}

// TestConformanceNumericKey runs the kit on a table keyed by a number, with
// numeric tenant ids and a format that lets other spellings of a number
// ("+1001", "1001.0", "1001e0", " 1001") reach the plugin, which must refuse
// them instead of deleting tenant 1001.
func TestConformanceNumericKey(t *testing.T) {
	t.Parallel()
	f := setupNumeric(t).withProxy(t)
	var next atomic.Int64
	next.Store(999)
	plugintest.RunTenantDeleter(t, plugintest.DeleterOptions{
		Binary:          binary(t),
		Fixture:         f,
		TenantIDFormat:  `^.{1,64}$`,
		NewTenantID:     func() string { return strconv.FormatInt(next.Add(1), 10) },
		BadConfigs:      badConfigs(f.endpoint, f.table),
		BadConfigFields: badConfigFields,
		Seed:            40,
		CancelSeed:      3000,
	})
}

// testFormat is the tenant_id_format of the tests that use readable ids.
const testFormat = `^[a-z0-9-]{1,64}$`

func deleterVia(t *testing.T, f *fixture, endpoint string, concurrency int) sdk.TenantDeleter {
	p := plugintest.Launch(t, binary(t), sdk.KindTenantDeleter)
	d := p.Deleter(t)
	cfg := f.Config(t)
	cfg["endpoint"] = endpoint
	cfg["concurrency"] = concurrency
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := d.Configure(ctx, &sdk.ConfigureRequest{Name: "dynamodb:audit_logs", Config: cfg, TenantIDFormat: testFormat})
	require.NoError(t, err)
	return d
}

func TestUnprocessedItemsRetriedAndCountedExactly(t *testing.T) {
	t.Parallel()
	f := setup(t)
	proxy := &throttlingProxy{target: f.endpoint, mode: "half"}
	srv := httptest.NewServer(proxy)
	defer srv.Close()
	d := deleterVia(t, f, srv.URL, 8)
	seeded := f.Seed(t, "tenant-a", 200)
	other := f.Seed(t, "tenant-b", 30)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := d.Delete(ctx, &sdk.DeleteRequest{TenantID: "tenant-a"}, func(int64) {})
	require.NoError(t, err)
	require.Equal(t, seeded, resp.DeletedCount, "requested minus unprocessed, summed over retries")
	require.Zero(t, f.Remaining(t, "tenant-a"))
	require.Equal(t, other, f.Remaining(t, "tenant-b"))
	proxy.mu.Lock()
	calls := len(proxy.calls)
	proxy.mu.Unlock()
	require.Equal(t, 8*6, calls, "each of the 8 chunks needed 5 retries: 25 -> 13 -> 7 -> 4 -> 2 -> 1 unprocessed")
}

func TestUnprocessedItemsGiveUpAfterFiveRetries(t *testing.T) {
	t.Parallel()
	f := setup(t)
	proxy := &throttlingProxy{target: f.endpoint, mode: "all"}
	srv := httptest.NewServer(proxy)
	defer srv.Close()
	d := deleterVia(t, f, srv.URL, 1)
	f.Seed(t, "tenant-a", 10)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := d.Delete(ctx, &sdk.DeleteRequest{TenantID: "tenant-a"}, func(int64) {})
	require.Error(t, err)
	require.Contains(t, err.Error(), "10 items remain unprocessed in audit_logs after 5 retries")
	require.Equal(t, sdk.ClassRetryable, sdk.ClassOf(err), "throttling is worth retrying later")
	deleted, ok := sdk.DeletedBefore(err)
	require.True(t, ok)
	require.Zero(t, deleted)
	require.EqualValues(t, 10, f.Remaining(t, "tenant-a"))

	proxy.mu.Lock()
	defer proxy.mu.Unlock()
	require.Len(t, proxy.calls, 6, "the first try and 5 retries")
	for i := 1; i < len(proxy.calls); i++ {
		gap := proxy.calls[i].Sub(proxy.calls[i-1])
		require.GreaterOrEqual(t, gap, computeBackoff(i-1), "retry %d waited %s", i, gap)
	}
}

func TestStoreDownIsRetryable(t *testing.T) {
	t.Parallel()
	f := setup(t)
	d := deleterVia(t, f, f.endpoint, 2)
	f.Seed(t, "t", 5)
	port := testsvc.FreePort(t)
	p := plugintest.Launch(t, binary(t), sdk.KindTenantDeleter)
	d2 := p.Deleter(t)
	cfg := f.Config(t)
	cfg["endpoint"] = fmt.Sprintf("http://127.0.0.1:%d", port)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := d2.Configure(ctx, &sdk.ConfigureRequest{Name: "x", Config: cfg})
	require.Error(t, err)
	require.Equal(t, sdk.ClassRetryable, sdk.ClassOf(err), "%v", err)
	_ = d
}
