package console

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// A deleter's store that goes down under the running daemon puts a red
// banner on every page of the console, naming the plugin and the store's
// error; brought back, the banner goes.
func TestAStoreDownPutsABannerOnEveryPage(t *testing.T) {
	t.Parallel()
	rd := testsvc.Redis(t)
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Plugins: "health_interval = \"1s\"\nhealth_timeout = \"1s\"\n", Extra: fmt.Sprintf(`
[[deleter]]
name = "redis:sessions"
plugin = "redis"
[deleter.config]
addr = %q
patterns = ["session:{tenant}:*"]
`, rd.Addr)})
	u, base := ui(t, d, nil)
	ctx := tab(t, 2*time.Minute)
	do(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#main")))
	banner, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.getElementById("degraded-banner")`))
	require.NoError(t, err)
	require.False(t, banner, "no banner while the store is up")

	rd.Stop()
	pages := []string{"/ui/", "/ui/dlq", "/ui/tenants", "/ui/retention"}
	testsvc.Eventually(t, 30*time.Second, func() bool {
		_ = chromedp.Do(ctx, chromedp.Navigate(base+"/ui/"))
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.getElementById("degraded-banner")`))
		return err == nil && ok
	}, "the banner once the probe found Redis down")
	for _, p := range pages {
		do(t, ctx, chromedp.Navigate(base+p), chromedp.WaitVisible(chromedp.CSS("#degraded-banner")))
		got := text(t, ctx, "#degraded-banner")
		require.Contains(t, got, "The store of redis:sessions is down since", p)
		require.Regexp(t, `down since [0-9T:.+-]+: \S`, got, "%s: the error, whatever the client says of a refused connection", p)
	}
	shot(t, ctx, "store-down-banner")

	rd.Start()
	testsvc.Eventually(t, 30*time.Second, func() bool {
		_ = chromedp.Do(ctx, chromedp.Navigate(base+"/ui/dlq"))
		gone, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.getElementById("main") && !document.getElementById("degraded-banner")`))
		return err == nil && gone
	}, "the banner gone once Redis is back")
}
