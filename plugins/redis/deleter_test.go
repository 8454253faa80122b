package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/plugintest"
)

// fixture seeds keys with the Redis client and remembers every key it wrote
// per tenant, so that Remaining and Checksum read exactly those keys (with
// EXISTS and GET) and never depend on the glob matching under test.
type fixture struct {
	addr  string
	c     *redis.Client
	delim string // ends the tenant id in the patterns; ":" by default
	// password is the server's requirepass, proxy (when set) stands between
	// the plugin and the server, for the kit's outage checks.
	password string
	proxy    *plugintest.Proxy

	mu   sync.Mutex
	keys map[string][]string // tenant -> keys the deleter must delete
	all  map[string][]string // tenant -> every key seeded, decoys included
}

func newFixture(addr string, c *redis.Client, delim string) *fixture {
	return &fixture{addr: addr, c: c, delim: delim, keys: map[string][]string{}, all: map[string][]string{}}
}

func (f *fixture) patterns() []any {
	return []any{"session:{tenant}" + f.delim + "*", "csrf:{tenant}" + f.delim + "*"}
}

func (f *fixture) Config(testing.TB) map[string]any {
	cfg := map[string]any{"addr": f.addr, "patterns": f.patterns(), "scan_count": 500}
	if f.password != "" {
		cfg["password"] = f.password
	}
	return cfg
}

func (f *fixture) StopStore(testing.TB)    { f.proxy.Stop() }
func (f *fixture) StartStore(t testing.TB) { f.proxy.Start(t) }

// UnreachableConfig points at a port nothing listens on.
func (f *fixture) UnreachableConfig(t testing.TB) (map[string]any, string) {
	cfg := f.Config(t)
	cfg["addr"] = fmt.Sprintf("127.0.0.1:%d", testsvc.FreePort(t))
	return cfg, "addr"
}

// kitFixture is a fixture for the kit: a server that requires a password,
// reached by the plugin through a proxy.
func kitFixture(t *testing.T, delim string) *fixture {
	srv := testsvc.Redis(t)
	const password = "redis-kit-pw-4431"
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	require.NoError(t, admin.ConfigSet(context.Background(), "requirepass", password).Err())
	admin.Close()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, Password: password})
	t.Cleanup(func() { c.Close() })
	proxy := plugintest.NewProxy(t, srv.Addr)
	f := newFixture(proxy.Addr(), c, delim)
	f.password, f.proxy = password, proxy
	return f
}

// Seed writes n session keys and n csrf keys, plus keys that look alike but
// belong to nobody: they must survive every delete.
func (f *fixture) Seed(t testing.TB, tenant string, n int) int64 {
	ctx := testsvc.Context(t, 2*time.Minute)
	pipe := f.c.Pipeline()
	var keys []string
	for i := 0; i < n; i++ {
		for _, prefix := range []string{"session:", "csrf:"} {
			k := fmt.Sprintf("%s%s%s%d", prefix, tenant, f.delim, i)
			keys = append(keys, k)
			pipe.Set(ctx, k, fmt.Sprintf("%s-%d-%s", prefix, i, tenant), 0)
		}
		if i%1000 == 999 {
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	decoys := []string{"session:" + tenant, "other:" + tenant + f.delim + "1"}
	for _, k := range decoys {
		pipe.Set(ctx, k, "not matched by any pattern", 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.keys[tenant] = append(f.keys[tenant], keys...)
	f.all[tenant] = append(append(f.all[tenant], keys...), decoys...)
	f.mu.Unlock()
	return int64(2 * n)
}

func (f *fixture) seeded(tenant string, all bool) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if all {
		return slices.Clone(f.all[tenant])
	}
	return slices.Clone(f.keys[tenant])
}

// Remaining counts the tenant's seeded keys that still exist.
func (f *fixture) Remaining(t testing.TB, tenant string) int64 {
	keys := f.seeded(tenant, false)
	var n int64
	ctx := testsvc.Context(t, time.Minute)
	for start := 0; start < len(keys); start += 1000 {
		got, err := f.c.Exists(ctx, keys[start:min(start+1000, len(keys))]...).Result()
		require.NoError(t, err)
		n += got
	}
	return n
}

// Checksum hashes the name and value of every key seeded for the tenant,
// decoys included, and notes the ones that are gone.
func (f *fixture) Checksum(t testing.TB, tenant string) string {
	keys := f.seeded(tenant, true)
	sort.Strings(keys)
	ctx := testsvc.Context(t, 2*time.Minute)
	pipe := f.c.Pipeline()
	cmds := make([]*redis.StringCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.Get(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	h := sha256.New()
	for i, cmd := range cmds {
		v, err := cmd.Result()
		switch {
		case errors.Is(err, redis.Nil):
			fmt.Fprintf(h, "%q gone\n", keys[i])
		case err != nil:
			t.Fatal(err)
		default:
			fmt.Fprintf(h, "%q=%q\n", keys[i], v)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func buildPlugin(t *testing.T) string {
	return testsvc.Binary(t, "lifecycled-plugin-redis")
}

func TestConformance(t *testing.T) {
	t.Parallel()
	// The default UUID format with ':' after {tenant}; and a format that
	// accepts nearly anything but '|', with '|' after {tenant}, so that the
	// kit seeds bystanders like A+":x" and " "+A and sends hostile ids with
	// glob metacharacters that the plugin must escape.
	for name, tc := range map[string]struct{ format, delim string }{
		"uuid":       {"uuid", ":"},
		"permissive": {`^[^|]{1,200}$`, "|"},
	} {
		t.Run(name, func(t *testing.T) {
			f := kitFixture(t, tc.delim)
			addr := f.addr
			plugintest.RunTenantDeleter(t, plugintest.DeleterOptions{
				Binary:         buildPlugin(t),
				Fixture:        f,
				TenantIDFormat: tc.format,
				BadConfigs: map[string]map[string]any{
					"missing addr":             {"patterns": []any{"a:{tenant}:*"}},
					"pattern without {tenant}": {"addr": addr, "patterns": []any{"session:*"}},
					"unknown key":              {"addr": addr, "patterns": []any{"a:{tenant}"}, "pattern": "x"},
					"wrong type":               {"addr": addr, "patterns": "a:{tenant}"},
					"bad db":                   {"addr": addr, "patterns": []any{"a:{tenant}"}, "db": -1},
					"glob after {tenant}":      {"addr": addr, "patterns": []any{"a:{tenant}*"}},
				},
				BadConfigFields: map[string]string{
					"missing addr": "addr", "pattern without {tenant}": "patterns", "unknown key": "pattern",
					"wrong type": "patterns", "bad db": "db", "glob after {tenant}": "patterns",
				},
				CancelSeed: 50000,
			})
		})
	}
}

func TestGlobEscape(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"550e8400-e29b-41d4-a716-446655440000": `550e8400\-e29b\-41d4\-a716\-446655440000`,
		"a*b?c[d]e\\f^g":                       `a\*b\?c\[d\]e\\f\^g`,
		"plain":                                "plain",
		// Bytes, not runes: an invalid UTF-8 byte stays that byte.
		"a\xffb*":   "a\xffb\\*",
		"\xc3[":     "\xc3\\[",
		"\xe2\x82*": "\xe2\x82\\*",
		"zoë?":      "zoë\\?",
	}
	for in, want := range tests {
		require.Equal(t, want, globEscape(in), "globEscape(%q)", in)
	}
}

func TestStoreDownIsRetryableAndPartial(t *testing.T) {
	t.Parallel()
	srv := testsvc.Redis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	f := newFixture(srv.Addr, c, ":")
	p := plugintest.Launch(t, buildPlugin(t), sdk.KindTenantDeleter)
	d := p.Deleter(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := d.Configure(ctx, &sdk.ConfigureRequest{Name: "redis:sessions", Config: f.Config(t), TenantIDFormat: `^t[0-9]$`})
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
	_, err = d.Configure(ctx, &sdk.ConfigureRequest{Name: "redis:sessions", Config: f.Config(t), TenantIDFormat: `^t[0-9]$`})
	require.Equal(t, sdk.ClassRetryable, sdk.ClassOf(err), "%v", err)
}

func TestPasswordNeverLeaves(t *testing.T) {
	t.Parallel()
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

// TestDeleteBreakdownPerPattern: Delete says how many keys each pattern
// lost, as Count said beforehand, so that a report shows what went.
func TestDeleteBreakdownPerPattern(t *testing.T) {
	t.Parallel()
	srv := testsvc.Redis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const tenant = "44444444-dddd-4ddd-8ddd-444444444444"
	for i := 0; i < 1200; i++ {
		require.NoError(t, c.Set(ctx, fmt.Sprintf("session:%s:%d", tenant, i), "s", 0).Err())
	}
	for i := 0; i < 7; i++ {
		require.NoError(t, c.Set(ctx, fmt.Sprintf("csrf:%s:%d", tenant, i), "c", 0).Err())
	}
	f := newFixture(srv.Addr, c, ":")
	d := plugintest.Launch(t, buildPlugin(t), sdk.KindTenantDeleter).Deleter(t)
	cfg := f.Config(t)
	cfg["batch_size"] = 100
	_, err := d.Configure(ctx, &sdk.ConfigureRequest{Name: "redis:sessions", Config: cfg})
	require.NoError(t, err)
	want := map[string]int64{"session:{tenant}:*": 1200, "csrf:{tenant}:*": 7}
	count, err := d.Count(ctx, &sdk.CountRequest{TenantID: tenant})
	require.NoError(t, err)
	require.Equal(t, want, count.Breakdown)
	resp, err := d.Delete(ctx, &sdk.DeleteRequest{TenantID: tenant}, func(int64) {})
	require.NoError(t, err)
	require.EqualValues(t, 1207, resp.DeletedCount)
	require.Equal(t, want, resp.Breakdown)
	resp, err = d.Delete(ctx, &sdk.DeleteRequest{TenantID: tenant}, func(int64) {})
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"session:{tenant}:*": 0, "csrf:{tenant}:*": 0}, resp.Breakdown)
}
