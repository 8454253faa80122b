package console

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

// countRefreshes makes the page count, for the live region id, the
// refreshes that fell due (window.due: each time htmx was about to ask,
// whether or not the console let it), those answered (window.answered)
// and those swapped in (window.refreshes), and record the method of every
// live request.
const countRefreshes = `(() => {
	window.sameDocument = true; window.refreshes = 0; window.due = 0; window.answered = 0; window.liveVerbs = [];
	document.addEventListener("htmx:beforeSend", e => { if (e.target.hasAttribute && e.target.hasAttribute("data-live")) window.liveVerbs.push(e.detail.requestConfig.verb); });
	document.addEventListener("htmx:beforeRequest", e => { if (e.target.id === %[1]q) window.due++; });
	document.addEventListener("htmx:afterRequest", e => { if (e.target.id === %[1]q) window.answered++; });
	document.addEventListener("htmx:afterSettle", e => { if (e.target.id === %[1]q) window.refreshes++; });
})()`

// a reason half typed into the pause form of the
// topics table (a live region) is still there after the next refresh when
// the operator clicked elsewhere on the page (the field lost focus): a
// refresh must not take their work.
func TestLiveKeepsAHalfTypedReason(t *testing.T) {
	t.Parallel()
	_, d := stormDaemon(t, "")
	u, base := ui(t, d, nil)
	ctx := tab(t, 2*time.Minute)
	do(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#dlq-depth")),
		chromedp.Navigate(base+"/ui/dlq"), chromedp.WaitVisible(chromedp.CSS("#topics")),
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(countRefreshes, "live-dlq")),
		chromedp.SendKeys(chromedp.CSS("#reason-0"), "INC-4711 broker"),
		// The operator clicks on the page's text (to copy a topic name).
		chromedp.Evaluate[chromedp.Void](`document.activeElement.blur()`))
	waitJS(t, ctx, `window.sameDocument === true && window.due >= 2`, "two refreshes of the topics to fall due")
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("reason-0").value`))
	require.NoError(t, err)
	require.Equal(t, "INC-4711 broker", v, "the half-typed reason survives the refreshes")
}

// a message selected while a refresh of the
// results is under way (the click lands between the request and its
// answer) stays selected.
func TestLiveKeepsASelectionMadeDuringARefresh(t *testing.T) {
	t.Parallel()
	_, d := stormDaemon(t, "")
	u, base := ui(t, d, nil)
	ctx := tab(t, 2*time.Minute)
	do(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#dlq-depth")),
		chromedp.Navigate(base+"/ui/dlq/search?topic=orders.dlq.v1"), chromedp.WaitVisible(chromedp.CSS("#results")),
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(countRefreshes, "live-results")),
		chromedp.Evaluate[chromedp.Void](`document.addEventListener("htmx:beforeSend", e => {
			if (e.target.id === "live-results" && !window.clicked) { window.clicked = true; document.querySelector("input.select-msg").click(); }
		})`))
	waitJS(t, ctx, `window.sameDocument === true && window.clicked === true && window.answered >= 1`, "a refresh answered with a click during it")
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("input.select-msg:checked").length`))
	require.NoError(t, err)
	require.Equal(t, 1, n, "the message selected during the refresh is still selected")
}

// live refreshes are GETs only, and keep working
// after navigating by a link inside a live region (the topic's link in
// the topics table).
func TestLiveIsGETsAndSurvivesALinkInside(t *testing.T) {
	t.Parallel()
	_, d := stormDaemon(t, "")
	u, base := ui(t, d, nil)
	ctx := tab(t, 3*time.Minute)
	do(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#dlq-depth")),
		chromedp.Navigate(base+"/ui/dlq"), chromedp.WaitVisible(chromedp.CSS("#topics")),
		chromedp.Click(chromedp.CSS(`#topics tr[data-topic="orders.dlq.v1"] td a`)), chromedp.WaitVisible(chromedp.CSS("#results")),
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(countRefreshes, "live-results")))
	waitJS(t, ctx, `window.sameDocument === true && window.refreshes >= 2`, "the results to refresh after a link in a live region")
	verbs, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.liveVerbs`))
	require.NoError(t, err)
	require.NotEmpty(t, verbs)
	for _, v := range verbs {
		require.Equal(t, "get", v)
	}
}

// a form inside a live region submits as forms
// do anywhere else in the console: the Pause button of a topic's row on
// /ui/dlq pauses its automatic retries (through the session of
// lifecycled ui) and lands back on the page with the notice.
func TestPauseFromTheTopicsTable(t *testing.T) {
	t.Parallel()
	_, d := stormDaemon(t, "")
	u, base := ui(t, d, nil)
	ctx := tab(t, 2*time.Minute)
	do(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#dlq-depth")),
		chromedp.Navigate(base+"/ui/dlq"), chromedp.WaitVisible(chromedp.CSS("#topics")),
		chromedp.SendKeys(chromedp.CSS("#reason-0"), "review"),
		chromedp.Click(chromedp.CSS(`#topics tr[data-topic="orders.dlq.v1"] button`)))
	deadline := time.Now().Add(20 * time.Second)
	for !paused(t, d, "orders.dlq.v1") {
		if time.Now().Before(deadline) {
			time.Sleep(500 * time.Millisecond)
			continue
		}
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("document.body ? document.body.innerText : ''"))
		t.Fatalf("the topic is not paused from its row; the browser is at %s showing:\n%q", loc, body)
	}
	do(t, ctx, chromedp.WaitVisible(chromedp.CSS(".notice")))
}

// docs/console.md: live mode covers "bulk operations and running
// erasures every second or two", and "The Live button in the header
// pauses it": paused, a running operation's page sends no more requests.
func TestPausedStopsTheOperationsProgress(t *testing.T) {
	t.Parallel()
	_, d := stormDaemon(t, "")
	rate := 0.1
	op, err := apitest.Client(d).StartOperation(t.Context(), wire.OperationRequest{Action: "dead",
		Filter: json.RawMessage(`{"topic":"payments.dlq.v1","status":["PENDING"]}`), Rate: &rate})
	require.NoError(t, err)
	u, base := ui(t, d, nil)
	ctx := tab(t, 2*time.Minute)
	do(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#main")),
		chromedp.Navigate(base+"/ui/dlq/operations/"+op.ID), chromedp.WaitVisible(chromedp.CSS("#op-progress")),
		chromedp.Click(chromedp.CSS("#live-toggle")),
		chromedp.Evaluate[chromedp.Void](`window.sameDocument = true; window.sent = [];
			document.addEventListener("htmx:beforeSend", e => window.sent.push(e.detail.requestConfig.path))`))
	require.Equal(t, "Live: paused", text(t, ctx, "#live-toggle"))
	time.Sleep(4 * time.Second)
	sent, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.sameDocument === true ? window.sent : ["reloaded"]`))
	require.NoError(t, err)
	require.Empty(t, sent, "requests sent while paused")
}
