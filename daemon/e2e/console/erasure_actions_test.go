package console

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/daemon/wire"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

const nobodyUID = 65534

func approvalConfig(addr, deletion, patterns string) string {
	return fmt.Sprintf(`
[deletion]
poll_interval = "100ms"
retry_initial_delay = "1h"
retry_max_delay = "1h"
lease = "2s"
require_approval = true
%s

[[deleter]]
name = "redis:sessions"
plugin = "redis"
[deleter.config]
addr = %q
patterns = %s
`, deletion, addr, patterns)
}

// allKeys checksums every key of Redis, the leaving tenant's too: what a
// refused approval must leave as it was.
func allKeys(t *testing.T, rc *redis.Client) (string, int) {
	t.Helper()
	ctx := testsvc.Context(t, time.Minute)
	keys, err := rc.Keys(ctx, "*").Result()
	require.NoError(t, err)
	var b strings.Builder
	for _, k := range keys {
		v, err := rc.Get(ctx, k).Result()
		require.NoError(t, err)
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	return fmt.Sprint(len(b.String()), "/", len(keys)), len(keys)
}

func jobJSON(t *testing.T, d *testsvc.Daemon, tenant string) string {
	t.Helper()
	var a apitest.Answer
	apitest.Record(d, &a).Deletion(t.Context(), tenant)
	require.Equal(t, 200, a.Code)
	return string(a.Body)
}

// the plan shown on the tenant's page is the one
// approved. After the page was shown, the deleter's config gains a key
// pattern (a reload): the page's Approve is refused and nothing changes.
// Then, with the store down (an incomplete plan), it is refused again.
// A crafted plan_hash (empty, another one) is refused.
func TestApprovalIsOfThePlanShown(t *testing.T) {
	t.Parallel()
	rd := testsvc.RedisPersistent(t)
	rc := fillTenants(t, rd)
	for i := 0; i < 5; i++ {
		require.NoError(t, rc.Set(t.Context(), fmt.Sprintf("p:%s:%d", leaving, i), "pref", 0).Err())
	}
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Extra: approvalConfig(rd.Addr, "", `["s:{tenant}:*"]`)})
	api := apitest.Client(d)
	u, base := ui(t, d, nil)
	ctx := tab(t, 3*time.Minute)
	page := base + "/ui/tenants/" + leaving
	do(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#main")),
		chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#confirm")),
		chromedp.SendKeys(chromedp.CSS("#confirm"), leaving), chromedp.Click(chromedp.CSS("#erase")),
		chromedp.WaitVisible(chromedp.CSS("#approve")))
	shown := text(t, ctx, "#plan-hash")
	keysBefore, n := allKeys(t, rc)
	require.Equal(t, 56, n)
	jobBefore := jobJSON(t, d, leaving)

	// The deleter gains a pattern after the page was shown.
	cfg, err := os.ReadFile(d.ConfigPath)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(d.ConfigPath, []byte(strings.Replace(string(cfg), `["s:{tenant}:*"]`, `["s:{tenant}:*", "p:{tenant}:*"]`, 1)), 0o600))
	_, err = api.Reload(t.Context())
	require.NoError(t, err)
	testsvc.Eventually(t, time.Minute, func() bool {
		p, err := api.Plan(t.Context(), leaving)
		return err == nil && p.Complete && p.PlanHash != nil && *p.PlanHash != shown
	}, "the plan to change")
	do(t, ctx, chromedp.Click(chromedp.CSS("#approve")), chromedp.WaitVisible(chromedp.CSS(".error")))
	t.Logf("approve of the stale plan: %s", text(t, ctx, ".error"))
	time.Sleep(time.Second)
	require.Equal(t, jobBefore, jobJSON(t, d, leaving), "the job is as it was (AWAITING_APPROVAL)")
	after, _ := allKeys(t, rc)
	require.Equal(t, keysBefore, after, "no key deleted")

	// Crafted hashes.
	for _, h := range []string{"", "sha256:" + strings.Repeat("0", 64), shown} {
		p := post(t, ctx, "/ui/tenants/"+leaving+"/approve", true, false, 0, "once", "k"+h, "plan_hash", h)
		t.Logf("approve with plan_hash %q: %d %q", h, p.Status, p.Errors())
		require.GreaterOrEqual(t, p.Status, 400, "plan_hash %q", h)
	}
	require.Equal(t, jobBefore, jobJSON(t, d, leaving))

	// The page shown again, then the store goes down: incomplete.
	do(t, ctx, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#approve")))
	require.Contains(t, text(t, ctx, "#plan"), "p:{tenant}:*")
	rd.Stop()
	do(t, ctx, chromedp.Click(chromedp.CSS("#approve")), chromedp.WaitVisible(chromedp.CSS(".error")))
	t.Logf("approve with the store down: %s", text(t, ctx, ".error"))
	require.Equal(t, jobBefore, jobJSON(t, d, leaving), "the job is as it was (AWAITING_APPROVAL)")
	rd.Start()
	testsvc.Eventually(t, time.Minute, func() bool {
		c, err := api.Counts(t.Context(), leaving)
		return err == nil && c.Complete
	}, "Redis back")
	after, _ = allKeys(t, rc)
	require.Equal(t, keysBefore, after, "no key deleted")
}

// with approvers_distinct the uid that asked for
// the erasure from the console cannot approve it from the console; a
// second operator (another uid, its own `lifecycled ui`) can.
func TestApproversDistinctThroughTheConsole(t *testing.T) {
	testsvc.Need(t, os.Getuid() == 0, "needs root to run a console as another uid")
	t.Parallel()
	rd := testsvc.RedisPersistent(t)
	rc := fillTenants(t, rd)
	others := redisDigest(t, rc)
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Extra: approvalConfig(rd.Addr, "approvers_distinct = true", `["s:{tenant}:*"]`)})
	require.NoError(t, os.Chmod(d.Dir, 0o755))
	require.NoError(t, os.Chown(d.Socket, 0, nobodyUID))
	u, base := ui(t, d, nil)
	ctx := tab(t, 3*time.Minute)
	page := base + "/ui/tenants/" + leaving
	do(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#main")),
		chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#confirm")),
		chromedp.SendKeys(chromedp.CSS("#confirm"), leaving), chromedp.Click(chromedp.CSS("#erase")),
		chromedp.WaitVisible(chromedp.CSS("#approve")))
	before := jobJSON(t, d, leaving)
	do(t, ctx, chromedp.Click(chromedp.CSS("#approve")), chromedp.WaitVisible(chromedp.CSS(".error")))
	t.Logf("the requester approving: %s", text(t, ctx, ".error"))
	require.Contains(t, text(t, ctx, ".error"), "uid 0 requested")
	require.Equal(t, before, jobJSON(t, d, leaving))

	u2, base2 := ui(t, d, &syscall.Credential{Uid: nobodyUID, Gid: nobodyUID})
	ctx2 := tab(t, 3*time.Minute)
	do(t, ctx2, chromedp.Navigate(u2), chromedp.WaitVisible(chromedp.CSS("#main")),
		chromedp.Navigate(base2+"/ui/tenants/"+leaving), chromedp.WaitVisible(chromedp.CSS("#approve")),
		chromedp.Click(chromedp.CSS("#approve")))
	testsvc.Eventually(t, time.Minute, func() bool {
		j, err := apitest.Client(d).Deletion(t.Context(), leaving)
		return err == nil && j.Status == "COMPLETED"
	}, "approved by the second uid and run")
	var j wire.Job
	require.NoError(t, json.Unmarshal([]byte(jobJSON(t, d, leaving)), &j))
	keys, err := rc.Keys(t.Context(), "s:"+leaving+":*").Result()
	require.NoError(t, err)
	require.Empty(t, keys)
	require.Equal(t, others, redisDigest(t, rc))
}

// a read-only uid sees none of the new controls
// (approve, hold, release, retry) on a tenant awaiting approval and then
// on hold, and each new route forged from its page, with and without the
// CSRF token, is refused (403) and changes nothing; a mutating uid's POST
// without the token is refused as well.
func TestNewTenantRoutesRefusedToReadOnlyAndWithoutToken(t *testing.T) {
	testsvc.Need(t, os.Getuid() == 0, "needs root to run a console as another uid")
	t.Parallel()
	rd := testsvc.RedisPersistent(t)
	rc := fillTenants(t, rd)
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Extra: approvalConfig(rd.Addr, "", `["s:{tenant}:*"]`),
		Admin: fmt.Sprintf("allow_uids = [0]\nread_only_uids = [%d]", nobodyUID)})
	require.NoError(t, os.Chmod(d.Dir, 0o755))
	require.NoError(t, os.Chown(d.Socket, 0, nobodyUID))
	api := apitest.Client(d)
	_, err := api.RequestDeletion(t.Context(), leaving, nil)
	require.NoError(t, err)
	plan, err := api.Plan(t.Context(), leaving)
	require.NoError(t, err)
	hash := *plan.PlanHash
	keys, _ := allKeys(t, rc)

	state := func() string {
		var h apitest.Answer
		apitest.Record(d, &h).HoldOf(t.Context(), leaving)
		hold := string(h.Body)
		if h.Code == 404 {
			hold = "no hold"
		}
		return jobJSON(t, d, leaving) + "\n" + hold
	}
	forgeAll := func(ctx context.Context, who string, tokens []bool) {
		for _, withToken := range tokens {
			for _, r := range []struct{ path, k, v string }{
				{"/approve", "plan_hash", hash}, {"/hold", "reason", "forged"}, {"/release", "", ""}, {"/retry", "", ""},
			} {
				before := state()
				code := forge(t, ctx, "/ui/tenants/"+leaving+r.path, withToken, r.k, r.v)
				require.Equal(t, 403, code, "%s: %s with token=%v", who, r.path, withToken)
				require.Equal(t, before, state(), "%s: %s with token=%v changed nothing", who, r.path, withToken)
			}
		}
	}

	uro, basero := ui(t, d, &syscall.Credential{Uid: nobodyUID, Gid: nobodyUID})
	ro := tab(t, 3*time.Minute)
	do(t, ro, chromedp.Navigate(uro), chromedp.WaitVisible(chromedp.CSS("#readonly")))
	controls := func() int {
		n, err := chromedp.Run(ro, chromedp.Evaluate[int](`document.querySelectorAll("form[method=post], #approve, #place-hold, #release, #retry-now, #hold-reason-input").length`))
		require.NoError(t, err)
		return n
	}
	do(t, ro, chromedp.Navigate(basero+"/ui/tenants/"+leaving), chromedp.WaitVisible(chromedp.CSS("#plan-hash")))
	require.Equal(t, hash, text(t, ro, "#plan-hash"))
	require.Zero(t, controls(), "awaiting approval: no control for a read-only uid")
	forgeAll(ro, "read-only", []bool{true, false})

	_, err = api.Hold(t.Context(), leaving, wire.HoldRequest{Reason: ptr("case 1")})
	require.NoError(t, err)
	do(t, ro, chromedp.Navigate(basero+"/ui/tenants/"+leaving), chromedp.WaitVisible(chromedp.CSS("#hold-reason")))
	require.Zero(t, controls(), "on hold: no control for a read-only uid")
	forgeAll(ro, "read-only, on hold", []bool{true, false})

	u, base := ui(t, d, nil)
	rw := tab(t, 3*time.Minute)
	do(t, rw, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#main")),
		chromedp.Navigate(base+"/ui/tenants/"+leaving), chromedp.WaitVisible(chromedp.CSS("#release")))
	forgeAll(rw, "mutating, no token", []bool{false})
	after, _ := allKeys(t, rc)
	require.Equal(t, keys, after)
}

func ptr[T any](v T) *T { return &v }
