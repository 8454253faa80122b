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

// TestRedisFingerprintNamesTheServer: the fingerprint covered the db
// number and the patterns only, so a deleter repointed at another Redis
// with the same key layout kept the plan an operator approved for the
// first (found by an outside attack). It now names the address too: two
// servers give two fingerprints, one server the same from any process,
// and a Delete checked against the first server's plan refuses the
// second, deleting nothing there.
func TestRedisFingerprintNamesTheServer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	one, two := testsvc.Redis(t), testsvc.Redis(t)
	var clients []*redis.Client
	for _, srv := range []*testsvc.RedisServer{one, two} {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr})
		t.Cleanup(func() { c.Close() })
		for i := range 5 {
			require.NoError(t, c.Set(ctx, fmt.Sprintf("session:a:%d", i), "s", 0).Err())
			require.NoError(t, c.Set(ctx, fmt.Sprintf("session:b:%d", i), "s", 0).Err())
		}
		clients = append(clients, c)
	}
	launch := func(addr string) sdk.TenantDeleter {
		d := plugintest.Launch(t, buildPlugin(t), sdk.KindTenantDeleter).Deleter(t)
		configureAt(ctx, t, d, addr)
		return d
	}
	plan := func(d sdk.TenantDeleter) string {
		p, err := d.(sdk.Planner).Plan(ctx, &sdk.PlanRequest{TenantID: "a"})
		require.NoError(t, err)
		return p.Fingerprint
	}
	d := launch(one.Addr)
	fpOne := plan(d)
	require.NotEqual(t, fpOne, plan(launch(two.Addr)), "the same layout on two servers")
	require.Equal(t, fpOne, plan(launch(one.Addr)), "the same server from another process")

	// Repointed after the check.
	configureAt(ctx, t, d, two.Addr)
	_, err := d.Delete(ctx, &sdk.DeleteRequest{TenantID: "a", PlanFingerprint: fpOne}, nil)
	require.Error(t, err)
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err))
	require.Contains(t, err.Error(), fmt.Sprintf("new: store addr %q db 0", two.Addr))
	for i, c := range clients {
		n, err := c.DBSize(ctx).Result()
		require.NoError(t, err)
		require.Equal(t, int64(10), n, "server %d: nothing deleted", i+1)
	}
	resp, err := d.Delete(ctx, &sdk.DeleteRequest{TenantID: "a", PlanFingerprint: plan(d)}, nil)
	require.NoError(t, err)
	require.Equal(t, int64(5), resp.DeletedCount)
	require.Equal(t, int64(5), clients[1].DBSize(ctx).Val(), "tenant b's keys stay")
	require.Equal(t, int64(10), clients[0].DBSize(ctx).Val(), "the first server is untouched")
}

func configureAt(ctx context.Context, t *testing.T, d sdk.TenantDeleter, addr string) {
	t.Helper()
	_, err := d.Configure(ctx, &sdk.ConfigureRequest{Name: "redis:sessions",
		Config: map[string]any{"addr": addr, "patterns": []any{"session:{tenant}:*"}}, TenantIDFormat: `^[a-z]+$`})
	require.NoError(t, err)
}
