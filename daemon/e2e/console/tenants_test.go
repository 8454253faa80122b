package console

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

const (
	leaving = "550e8400-e29b-41d4-a716-446655440000"
	staying = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
)

// redisTenants is Redis holding 40 session keys of the leaving tenant and
// 10 of a tenant who stays (plus one key of no tenant).
func redisTenants(t *testing.T) (*testsvc.RedisServer, *redis.Client) {
	t.Helper()
	r := testsvc.Redis(t)
	return r, fillTenants(t, r)
}

// fillTenants puts redisTenants' keys into r.
func fillTenants(t *testing.T, r *testsvc.RedisServer) *redis.Client {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { rc.Close() })
	ctx := testsvc.Context(t, time.Minute)
	for i := 0; i < 40; i++ {
		require.NoError(t, rc.Set(ctx, fmt.Sprintf("s:%s:%d", leaving, i), "session", 0).Err())
	}
	for i := 0; i < 10; i++ {
		require.NoError(t, rc.Set(ctx, fmt.Sprintf("s:%s:%d", staying, i), fmt.Sprint("kept-", i), 0).Err())
	}
	require.NoError(t, rc.Set(ctx, "config:global", "x", 0).Err())
	return rc
}

// redisDigest checksums every key but the leaving tenant's, with values:
// what an erasure must not change.
func redisDigest(t *testing.T, rc *redis.Client) string {
	t.Helper()
	ctx := testsvc.Context(t, time.Minute)
	keys, err := rc.Keys(ctx, "*").Result()
	require.NoError(t, err)
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		if strings.HasPrefix(k, "s:"+leaving+":") {
			continue
		}
		v, err := rc.Get(ctx, k).Result()
		require.NoError(t, err)
		fmt.Fprintf(h, "%s=%s\n", k, v)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func redisDeleter(addr string) string {
	return fmt.Sprintf(`
[deletion]
poll_interval = "100ms"
retry_initial_delay = "300ms"
retry_max_delay = "2s"
lease = "2s"

[[deleter]]
name = "redis:sessions"
plugin = "redis"
[deleter.config]
addr = %q
patterns = ["s:{tenant}:*"]
`, addr)
}

// A tenant erasure from the console: the counts per store and pattern, a
// typed confirmation the server checks too (a wrong one starts nothing),
// then live progress to COMPLETED with the verified report; the other
// tenant's keys are untouched.
func TestTenantErasureWithTypedConfirmation(t *testing.T) {
	t.Parallel()
	r, rc := redisTenants(t)
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Extra: redisDeleter(r.Addr)})
	others := redisDigest(t, rc)
	u, base := ui(t, d, nil)
	ctx := tab(t, 3*time.Minute)
	do(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#h-dlq")),
		chromedp.Click(chromedp.CSS(`nav a[href="/ui/tenants"]`)), chromedp.WaitVisible(chromedp.CSS("#t-id")),
		chromedp.SendKeys(chromedp.CSS("#t-id"), leaving), chromedp.Click(chromedp.CSS("#t-open")),
		chromedp.WaitVisible(chromedp.CSS("#counts")))
	require.Equal(t, "40", text(t, ctx, "#count-total"))
	require.Contains(t, text(t, ctx, `#counts`), "s:{tenant}:*")
	require.Contains(t, text(t, ctx, `#counts tr[data-deleter="redis:sessions"]`), "40")
	shot(t, ctx, "tenant")

	// The button waits for the exact id; a wrong one forced through is
	// refused by the server and starts nothing.
	disabled := func() bool {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("erase").disabled`))
		require.NoError(t, err)
		return v
	}
	require.True(t, disabled())
	do(t, ctx, chromedp.SendKeys(chromedp.CSS("#confirm"), staying))
	require.True(t, disabled(), "another tenant's id does not confirm")
	do(t, ctx, chromedp.RemoveAttribute(chromedp.CSS("#erase"), "disabled"), chromedp.Click(chromedp.CSS("#erase")),
		chromedp.WaitVisible(chromedp.CSS(".error")))
	require.Contains(t, text(t, ctx, ".error"), "CONFIRMATION_MISMATCH")
	code, _ := apitest.Refused(apitest.Client(d).Deletion(t.Context(), leaving))(t)
	require.Equal(t, 404, code, "no job was started")

	do(t, ctx, chromedp.Navigate(base+"/ui/tenants/"+leaving), chromedp.WaitVisible(chromedp.CSS("#confirm")),
		chromedp.SendKeys(chromedp.CSS("#confirm"), leaving))
	require.False(t, disabled(), "the exact id enables the button")
	do(t, ctx, chromedp.Click(chromedp.CSS("#erase")), chromedp.WaitVisible(chromedp.CSS("#job")))
	waitJS(t, ctx, `document.getElementById("job-status") && document.getElementById("job-status").textContent === "COMPLETED" && !!document.getElementById("job-verified")`,
		"the job page to reach COMPLETED, verified, by itself")
	require.Equal(t, "0", text(t, ctx, `#verification tr[data-deleter="redis:sessions"] [data-left]`))
	require.Contains(t, text(t, ctx, `#deleters tr[data-deleter="redis:sessions"] [data-deleted]`), "40")
	shot(t, ctx, "erasure")

	n, err := rc.Keys(context.Background(), "s:"+leaving+":*").Result()
	require.NoError(t, err)
	require.Empty(t, n, "the tenant's keys are gone")
	require.Equal(t, others, redisDigest(t, rc), "every other key is as it was")
}
