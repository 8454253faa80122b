package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
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

	"github.com/lifecycled/lifecycled/bench/internal/benchkit"
	"github.com/lifecycled/lifecycled/internal/seed001"
	"github.com/lifecycled/lifecycled/sdk"
)

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
