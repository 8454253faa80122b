package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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
	require.NoError(t, seed001.CreateAuditLogTable(context.Background(), c, name))
}

type fixture struct {
	endpoint string
	c        *dynamodb.Client
	table    string
}

func (f *fixture) Config(testing.TB) map[string]any {
	return map[string]any{"table": f.table, "partition_key": "tenant_id", "region": "us-east-1", "endpoint": f.endpoint,
		"access_key_id": "test", "secret_access_key": "test", "concurrency": 4}
}

func (f *fixture) Seed(t testing.TB, tenant string, n int) int64 {
	require.NoError(t, seed001.PutAuditLogs(context.Background(), f.c, f.table, tenant, n))
	return int64(n)
}

func (f *fixture) Remaining(t testing.TB, tenant string) int64 {
	if tenant == "" {
		return 0
	}
	var n int64
	p := dynamodb.NewQueryPaginator(f.c, &dynamodb.QueryInput{
		TableName: aws.String(f.table), KeyConditionExpression: aws.String("tenant_id = :t"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": &types.AttributeValueMemberS{Value: tenant}},
		Select:                    types.SelectCount, ConsistentRead: aws.Bool(true),
	})
	for p.HasMorePages() {
		out, err := p.NextPage(context.Background())
		require.NoError(t, err)
		n += int64(out.Count)
	}
	return n
}

func binary(t testing.TB) string { return testsvc.Binary(t, "lifecycled-plugin-dynamodb") }

func setup(t testing.TB) *fixture {
	endpoint := testsvc.Dynalite(t)
	c := newClient(t, endpoint)
	createTable(t, c, "audit_logs")
	return &fixture{endpoint: endpoint, c: c, table: "audit_logs"}
}

func TestConformance(t *testing.T) {
	f := setup(t)
	plugintest.RunTenantDeleter(t, plugintest.DeleterOptions{
		Binary:  binary(t),
		Fixture: f,
		BadConfigs: map[string]map[string]any{
			"missing table":    {"partition_key": "tenant_id", "region": "us-east-1", "endpoint": f.endpoint},
			"wrong key":        {"table": "audit_logs", "partition_key": "org_id", "region": "us-east-1", "endpoint": f.endpoint, "access_key_id": "a", "secret_access_key": "b"},
			"half credentials": {"table": "audit_logs", "partition_key": "tenant_id", "region": "us-east-1", "access_key_id": "a"},
			"bad concurrency":  {"table": "audit_logs", "partition_key": "tenant_id", "region": "us-east-1", "concurrency": 0},
			"unknown key":      {"table": "audit_logs", "partition_key": "tenant_id", "region": "us-east-1", "tabel": "x"},
		},
		Seed:       60,
		CancelSeed: 3000,
	})
}

// throttlingProxy sits in front of dynalite and moves part of every
// BatchWriteItem into UnprocessedItems, as a throttled table would: the
// withheld items are removed from the request before it is forwarded, so
// they really are not deleted.
type throttlingProxy struct {
	target string
	mode   string // "half": withhold half of each call with 2+ items; "all": withhold everything
	mu     sync.Mutex
	calls  []time.Time
}

func (p *throttlingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var withheld []json.RawMessage
	var table string
	if strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".BatchWriteItem") {
		p.mu.Lock()
		p.calls = append(p.calls, time.Now())
		p.mu.Unlock()
		var in struct {
			RequestItems map[string][]json.RawMessage
		}
		if err := json.Unmarshal(body, &in); err == nil {
			for tbl, reqs := range in.RequestItems {
				table = tbl
				keep := reqs
				switch {
				case p.mode == "all":
					withheld, keep = reqs, nil
				case len(reqs) > 1:
					withheld, keep = reqs[len(reqs)/2:], reqs[:len(reqs)/2]
				}
				if len(keep) == 0 {
					// Nothing to forward: answer as DynamoDB would.
					out, _ := json.Marshal(map[string]any{"UnprocessedItems": map[string]any{tbl: withheld}})
					writeDynamo(w, out)
					return
				}
				in.RequestItems[tbl] = keep
			}
			body, _ = json.Marshal(in)
		}
	}
	req, _ := http.NewRequest(r.Method, p.target+r.URL.Path, bytes.NewReader(body))
	req.Header = r.Header.Clone()
	req.ContentLength = int64(len(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if len(withheld) > 0 && resp.StatusCode == 200 {
		var m map[string]any
		if json.Unmarshal(out, &m) == nil {
			un, _ := m["UnprocessedItems"].(map[string]any)
			if un == nil {
				un = map[string]any{}
			}
			un[table] = withheld
			m["UnprocessedItems"] = un
			out, _ = json.Marshal(m)
		}
	}
	for k, v := range resp.Header {
		if k != "Content-Length" && k != "X-Amz-Crc32" {
			w.Header()[k] = v
		}
	}
	w.Header().Set("X-Amz-Crc32", fmt.Sprint(crc32.ChecksumIEEE(out)))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(out)
}

func writeDynamo(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amz-Crc32", fmt.Sprint(crc32.ChecksumIEEE(body)))
	_, _ = w.Write(body)
}

func deleterVia(t *testing.T, f *fixture, endpoint string, concurrency int) sdk.TenantDeleter {
	p := plugintest.Launch(t, binary(t), sdk.KindTenantDeleter)
	d := p.Deleter(t)
	cfg := f.Config(t)
	cfg["endpoint"] = endpoint
	cfg["concurrency"] = concurrency
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := d.Configure(ctx, &sdk.ConfigureRequest{Name: "dynamodb:audit_logs", Config: cfg})
	require.NoError(t, err)
	return d
}

func TestUnprocessedItemsRetriedAndCountedExactly(t *testing.T) {
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
