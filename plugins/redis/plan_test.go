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

func TestRedisPlanPerPattern(t *testing.T) {
	t.Parallel()
	srv := testsvc.Redis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const a, b = "Acme", "acme"
	seed := func(tenant string, sessions, csrf int) {
		for i := 0; i < sessions; i++ {
			require.NoError(t, c.Set(ctx, fmt.Sprintf("session:%s:%d", tenant, i), "s", 0).Err())
		}
		for i := 0; i < csrf; i++ {
			require.NoError(t, c.Set(ctx, fmt.Sprintf("csrf:%s:%d", tenant, i), "c", 0).Err())
		}
	}
	seed(a, 30, 4)
	seed(b, 11, 2)
	// Decoys: another spelling, a longer id, the id elsewhere in the key.
	for _, k := range []string{"session:Acme2:1", "session:ACME:1", "other:Acme:1", "session:Acme*:1"} {
		require.NoError(t, c.Set(ctx, k, "d", 0).Err())
	}
	d := plugintest.Launch(t, buildPlugin(t), sdk.KindTenantDeleter).Deleter(t)
	_, err := d.(sdk.Planner).Plan(ctx, &sdk.PlanRequest{TenantID: a})
	require.ErrorIs(t, err, sdk.ErrUnavailable, "Plan before Configure")
	configure := func(cfg map[string]any) {
		t.Helper()
		cfg["addr"] = srv.Addr
		_, err := d.Configure(ctx, &sdk.ConfigureRequest{Name: "redis:sessions", Config: cfg, TenantIDFormat: `^[A-Za-z0-9*]{1,20}$`})
		require.NoError(t, err)
	}
	plan := func(tenant string) *sdk.PlanResponse {
		t.Helper()
		p, err := d.(sdk.Planner).Plan(ctx, &sdk.PlanRequest{TenantID: tenant})
		require.NoError(t, err)
		return p
	}
	configure(map[string]any{"patterns": []any{"session:{tenant}:*", "csrf:{tenant}:*"}, "scan_count": 7})
	p := plan(a)
	require.Equal(t, []sdk.PlanStep{
		{Target: "session:{tenant}:*", Via: "SCAN MATCH *{tenant}* in db 0, keys matching session:{tenant}:*", Expected: 30},
		{Target: "csrf:{tenant}:*", Via: "SCAN MATCH *{tenant}* in db 0, keys matching csrf:{tenant}:*", Expected: 4},
	}, p.Steps)
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, p.Fingerprint)
	require.Len(t, p.Notes, 1)
	pb := plan(b)
	require.Equal(t, p.Fingerprint, pb.Fingerprint)
	require.Equal(t, int64(13), pb.Total())
	require.Zero(t, plan("Acm*").Total(), "a glob in the id matches only itself")
	require.Equal(t, int64(0), plan("nobody").Total())
	_, err = d.(sdk.Planner).Plan(ctx, &sdk.PlanRequest{TenantID: "Acme:x"})
	var se *sdk.Error
	require.ErrorAs(t, err, &se, "an id outside the format is refused")
	require.Equal(t, sdk.CodeInvalidArgument, se.Code)

	// Tuning does not change the fingerprint; the db and the patterns do.
	configure(map[string]any{"patterns": []any{"session:{tenant}:*", "csrf:{tenant}:*"}, "scan_count": 1000, "batch_size": 3, "workers": 2})
	require.Equal(t, p.Fingerprint, plan(a).Fingerprint)
	configure(map[string]any{"patterns": []any{"csrf:{tenant}:*", "session:{tenant}:*"}})
	require.NotEqual(t, p.Fingerprint, plan(a).Fingerprint, "pattern order decides which step a key counts under")
	configure(map[string]any{"patterns": []any{"session:{tenant}:*", "csrf:{tenant}:*"}, "db": 1})
	require.NotEqual(t, p.Fingerprint, plan(a).Fingerprint)
	require.Zero(t, plan(a).Total(), "db 1 is empty")

	configure(map[string]any{"patterns": []any{"session:{tenant}:*"}})
	one := plan(a)
	require.Equal(t, []sdk.PlanStep{{Target: "session:{tenant}:*", Via: "SCAN MATCH session:{tenant}:* in db 0", Expected: 30}}, one.Steps)
	require.Empty(t, one.Notes)

	// Plan changes nothing; after Delete it expects 0 with the same fingerprint.
	configure(map[string]any{"patterns": []any{"session:{tenant}:*", "csrf:{tenant}:*"}})
	keysBefore, err := c.Keys(ctx, "*").Result()
	require.NoError(t, err)
	require.Len(t, keysBefore, 34+13+4)
	p = plan(a)
	after, err := c.Keys(ctx, "*").Result()
	require.NoError(t, err)
	require.ElementsMatch(t, keysBefore, after)
	del, err := d.Delete(ctx, &sdk.DeleteRequest{TenantID: a}, func(int64) {})
	require.NoError(t, err)
	require.Equal(t, p.Total(), del.DeletedCount)
	gone := plan(a)
	require.Zero(t, gone.Total())
	require.Equal(t, p.Fingerprint, gone.Fingerprint)
	require.Equal(t, int64(13), plan(b).Total(), "the other tenant keeps its keys")
	for _, k := range []string{"session:Acme2:1", "session:ACME:1", "other:Acme:1", "session:Acme*:1"} {
		require.EqualValues(t, 1, c.Exists(ctx, k).Val(), k)
	}
}
