// Command pluginrpc measures the Count round trip through go-plugin (gRPC,
// AutoMTLS, a separate process) against the same call in process. It is its
// own plugin: run with LIFECYCLED_BENCH_PLUGIN=1 it serves the deleter.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/lifecycled/lifecycled/bench/internal/benchkit"
	"github.com/lifecycled/lifecycled/sdk"
)

// counter is a TenantDeleter over an in-memory map: the call's own cost is
// negligible, so the difference is the plugin boundary.
type counter struct {
	mu    sync.Mutex
	items map[string]int64
}

func (c *counter) Configure(context.Context, *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items = map[string]int64{"550e8400-e29b-41d4-a716-446655440000": 42}
	return &sdk.ConfigureResponse{PluginVersion: "bench"}, nil
}

func (c *counter) Count(_ context.Context, req *sdk.CountRequest) (*sdk.CountResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &sdk.CountResponse{Count: c.items[req.TenantID]}, nil
}

func (c *counter) Delete(context.Context, *sdk.DeleteRequest, sdk.Progress) (*sdk.DeleteResponse, error) {
	return &sdk.DeleteResponse{}, nil
}

func measure(d sdk.TenantDeleter, n int) []time.Duration {
	ctx := context.Background()
	req := &sdk.CountRequest{TenantID: "550e8400-e29b-41d4-a716-446655440000"}
	for i := 0; i < n/10; i++ { // warm up connections and caches
		_, _ = d.Count(ctx, req)
	}
	out := make([]time.Duration, n)
	for i := range out {
		start := time.Now()
		resp, err := d.Count(ctx, req)
		out[i] = time.Since(start)
		benchkit.Must(err, "count")
		if resp.Count != 42 {
			benchkit.Must(os.ErrInvalid, "wrong count")
		}
	}
	return benchkit.Sort(out)
}

func main() {
	if os.Getenv("LIFECYCLED_BENCH_PLUGIN") == "1" {
		sdk.ServeTenantDeleter(&counter{})
		return
	}
	n := flag.Int("n", 20000, "calls per side")
	procs := flag.Int("plugin-gomaxprocs", 1, "GOMAXPROCS of the plugin process")
	flag.Parse()
	benchkit.Header("plugin RPC: Count round trip")
	self, err := os.Executable()
	benchkit.Must(err, "find own binary")

	local := &counter{}
	_, _ = local.Configure(context.Background(), nil)
	in := measure(local, *n)

	// As the daemon launches plugins by default ([plugins] gomaxprocs = 1).
	p := benchkit.Launch(self, sdk.KindTenantDeleter, "LIFECYCLED_BENCH_PLUGIN=1", fmt.Sprintf("GOMAXPROCS=%d", *procs))
	defer p.Kill()
	remote := measure(p.Deleter(map[string]any{}), *n)

	benchkit.Report("in process: p50 / p99", "%v / %v", benchkit.Percentile(in, 50), benchkit.Percentile(in, 99))
	benchkit.Report("go-plugin gRPC: p50 / p99", "%v / %v", benchkit.Percentile(remote, 50), benchkit.Percentile(remote, 99))
	p50 := benchkit.Percentile(remote, 50)
	verdict := "meets"
	if p50 > 200*time.Microsecond {
		verdict = "MISSES"
	}
	benchkit.Report("target p50 <= 200us", "%s (p50 %v, %d calls)", verdict, p50, *n)
}
