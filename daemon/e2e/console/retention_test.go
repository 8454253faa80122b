package console

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// The retention page: the schedule with the next pass, a dry run that
// records no pass, and a pass asked for that appears in the list.
func TestRetentionDryRunAndPass(t *testing.T) {
	t.Parallel()
	metrics := testsvc.FreePort(t)
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Extra: "[archive]\nenabled = true\ninterval = \"1h\"\n",
		Admin: fmt.Sprintf("metrics_listen = \"127.0.0.1:%d\"", metrics)})
	// The console is on the socket only, never on the metrics port.
	requireStatus(t, http.StatusNotFound, get(t, fmt.Sprintf("http://127.0.0.1:%d/ui/", metrics)), "no console on TCP")
	u, base := ui(t, d, nil)
	ctx := tab(t, time.Minute)
	do(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#h-dlq")),
		chromedp.Navigate(base+"/ui/retention"), chromedp.WaitVisible(chromedp.CSS("#ret-schedule")))
	require.Contains(t, text(t, ctx, "#ret-schedule"), "every 1h0m0s")
	do(t, ctx, chromedp.Click(chromedp.CSS("#retention-dry-run")), chromedp.WaitVisible(chromedp.CSS(`#retention-result[data-dry-run="true"]`)))
	require.Contains(t, text(t, ctx, "#retention-result"), "Dry run")
	require.Equal(t, "0", text(t, ctx, "#ret-archived"))
	do(t, ctx, chromedp.Click(chromedp.CSS("#retention-run")), chromedp.WaitVisible(chromedp.CSS(`#retention-result[data-dry-run="false"]`)))
	require.Contains(t, text(t, ctx, "#passes"), "manual")
	shot(t, ctx, "retention")
}
