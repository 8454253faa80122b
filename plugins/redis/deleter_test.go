package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest"
)

type fixture struct {
	addr string
	c    *redis.Client
}

func (f *fixture) Config(testing.TB) map[string]any {
	return map[string]any{"addr": f.addr, "patterns": []any{"session:{tenant}:*", "csrf:{tenant}:*"}, "scan_count": 500}
}

// Seed writes n session keys and n csrf keys, plus keys that look alike but
// belong to nobody: they must survive every delete.
func (f *fixture) Seed(t testing.TB, tenant string, n int) int64 {
	ctx := context.Background()
	pipe := f.c.Pipeline()
	for i := 0; i < n; i++ {
		pipe.Set(ctx, fmt.Sprintf("session:%s:%d", tenant, i), "s", 0)
		pipe.Set(ctx, fmt.Sprintf("csrf:%s:%d", tenant, i), "c", 0)
		if i%1000 == 999 {
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	pipe.Set(ctx, "session:"+tenant, "no suffix: not matched", 0)
	pipe.Set(ctx, "other:"+tenant+":1", "other prefix", 0)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	return int64(2 * n)
}

func (f *fixture) Remaining(t testing.TB, tenant string) int64 {
	var n int64
	for _, p := range []string{"session:%s:*", "csrf:%s:*"} {
		iter := f.c.Scan(context.Background(), 0, fmt.Sprintf(p, globEscape(tenant)), 1000).Iterator()
		seen := map[string]bool{}
		for iter.Next(context.Background()) {
			seen[iter.Val()] = true
		}
		require.NoError(t, iter.Err())
		n += int64(len(seen))
	}
	return n
}

func buildPlugin(t *testing.T) string {
	return testsvc.Binary(t, "lifecycled-plugin-redis")
}

func TestConformance(t *testing.T) {
	srv := testsvc.Redis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	plugintest.RunTenantDeleter(t, plugintest.DeleterOptions{
		Binary:  buildPlugin(t),
		Fixture: &fixture{addr: srv.Addr, c: c},
		BadConfigs: map[string]map[string]any{
			"missing addr":             {"patterns": []any{"a:{tenant}:*"}},
			"pattern without {tenant}": {"addr": srv.Addr, "patterns": []any{"session:*"}},
			"unknown key":              {"addr": srv.Addr, "patterns": []any{"a:{tenant}"}, "pattern": "x"},
			"wrong type":               {"addr": srv.Addr, "patterns": "a:{tenant}"},
			"bad db":                   {"addr": srv.Addr, "patterns": []any{"a:{tenant}"}, "db": -1},
		},
		CancelSeed: 50000,
	})
}

func TestGlobEscape(t *testing.T) {
	tests := map[string]string{
		"550e8400-e29b-41d4-a716-446655440000": `550e8400\-e29b\-41d4\-a716\-446655440000`,
		"a*b?c[d]e\\f^g":                       `a\*b\?c\[d\]e\\f\^g`,
		"plain":                                "plain",
	}
	for in, want := range tests {
		require.Equal(t, want, globEscape(in))
	}
}

func TestStoreDownIsRetryableAndPartial(t *testing.T) {
	srv := testsvc.Redis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	f := &fixture{addr: srv.Addr, c: c}
	p := plugintest.Launch(t, buildPlugin(t), sdk.KindTenantDeleter)
	d := p.Deleter(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := d.Configure(ctx, &sdk.ConfigureRequest{Name: "redis:sessions", Config: f.Config(t)})
	require.NoError(t, err)
	f.Seed(t, "t1", 10)
	srv.Stop()
	_, err = d.Count(ctx, &sdk.CountRequest{TenantID: "t1"})
	require.Error(t, err)
	require.Equal(t, sdk.ClassRetryable, sdk.ClassOf(err), "%v", err)
	_, err = d.Delete(ctx, &sdk.DeleteRequest{TenantID: "t1"}, func(int64) {})
	require.Error(t, err)
	require.Equal(t, sdk.ClassRetryable, sdk.ClassOf(err), "%v", err)
	deleted, ok := sdk.DeletedBefore(err)
	require.True(t, ok)
	require.Zero(t, deleted)

	// Configure against a server that is down is retryable too.
	_, err = d.Configure(ctx, &sdk.ConfigureRequest{Name: "redis:sessions", Config: f.Config(t)})
	require.Equal(t, sdk.ClassRetryable, sdk.ClassOf(err), "%v", err)
}

func TestPasswordNeverLeaves(t *testing.T) {
	p := plugintest.Launch(t, buildPlugin(t), sdk.KindTenantDeleter)
	d := p.Deleter(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	port := testsvc.FreePort(t)
	_, err := d.Configure(ctx, &sdk.ConfigureRequest{Name: "r", Config: map[string]any{
		"addr": fmt.Sprintf("127.0.0.1:%d", port), "password": "sup3r-s3cret-pw", "patterns": []any{"s:{tenant}:*"}}})
	require.Error(t, err)
	require.NotContains(t, err.Error(), "sup3r-s3cret-pw")
}
