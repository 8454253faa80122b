package console

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
)

// A bulk retry from a failure group, at a rate, previewed first (how many,
// a sample; nothing changed), then watched on its page until it ends: all
// six orders republished and RESOLVED, the payments group untouched.
func TestBulkRetryFromAGroupWithProgress(t *testing.T) {
	t.Parallel()
	k, d := stormDaemon(t, "")
	orders := search(t, d, map[string][]string{"topic": {"orders.dlq.v1"}, "limit": {"1"}})
	group := orders.Messages[0].Group
	payments100 := url.Values{"topic": {"payments.dlq.v1"}, "limit": {"100"}}
	var paymentsBefore apitest.Answer
	apitest.Record(d, &paymentsBefore).Search(t.Context(), payments100)

	u, base := ui(t, d, nil)
	ctx := tab(t, 3*time.Minute)
	do(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#dlq-depth")),
		chromedp.Click(chromedp.CSS(`nav a[href="/ui/dlq"]`)), chromedp.WaitVisible(chromedp.CSS("#groups")),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`#groups tr[data-group="%s"] a.bulk-link`, group))),
		chromedp.WaitVisible(chromedp.CSS("#bulk-form")),
		chromedp.SetValue(chromedp.CSS("#b-action"), "retry"),
		chromedp.SetValue(chromedp.CSS("#b-rate"), "2"),
		chromedp.Click(chromedp.CSS("#bulk-preview")), chromedp.WaitVisible(chromedp.CSS("#bulk-preview-result")))
	require.Equal(t, "6", text(t, ctx, "#bulk-matched"))
	require.Contains(t, text(t, ctx, "#bulk-filter"), group)
	shot(t, ctx, "bulk-preview")
	require.EqualValues(t, 6, search(t, d, map[string][]string{"group": {group}, "status": {"PENDING"}}).Total, "the preview changed nothing")

	// At 2 messages/s the six take about three seconds: the page opens on
	// a running operation and follows it to the end without a reload
	// (the mark set on the document is still there).
	do(t, ctx, chromedp.Click(chromedp.CSS("#bulk-start")), chromedp.WaitVisible(chromedp.CSS("#op-progress")))
	state, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.sameDocument = true; document.getElementById("op-state").textContent`))
	require.NoError(t, err)
	require.Equal(t, "RUNNING", state)
	require.Contains(t, text(t, ctx, "#cancel-form"), "Cancel")
	waitJS(t, ctx, `document.getElementById("op-state") && document.getElementById("op-state").textContent === "COMPLETED"`,
		"the operation page to show the end by itself")
	same, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.sameDocument === true && !document.getElementById("cancel-form")`))
	require.NoError(t, err)
	require.True(t, same, "the progress came in place, and the cancel button went with the end")
	require.Equal(t, "6", text(t, ctx, "#op-done"))
	require.Equal(t, "6", text(t, ctx, "#op-succeeded"))
	require.Equal(t, "0", text(t, ctx, "#op-failed"))
	shot(t, ctx, "bulk-operation")

	require.EqualValues(t, 6, search(t, d, map[string][]string{"group": {group}, "status": {"RESOLVED"}}).Total)
	var paymentsAfter apitest.Answer
	apitest.Record(d, &paymentsAfter).Search(t.Context(), payments100)
	require.JSONEq(t, string(paymentsBefore.Body), string(paymentsAfter.Body), "the other group is untouched")

	// The payments, marked DEAD at one every ten seconds, cancelled from
	// the page: it ends CANCELLED with at most what was done by then.
	payments := search(t, d, map[string][]string{"topic": {"payments.dlq.v1"}, "limit": {"1"}}).Messages[0].Group
	do(t, ctx, chromedp.Navigate(base+"/ui/dlq/bulk?status=PENDING&group="+payments), chromedp.WaitVisible(chromedp.CSS("#bulk-form")),
		chromedp.SetValue(chromedp.CSS("#b-action"), "dead"), chromedp.SetValue(chromedp.CSS("#b-rate"), "0.1"),
		chromedp.Click(chromedp.CSS("#bulk-preview")), chromedp.WaitVisible(chromedp.CSS("#bulk-start")),
		chromedp.Click(chromedp.CSS("#bulk-start")), chromedp.WaitVisible(chromedp.CSS("#cancel-op")),
		chromedp.Click(chromedp.CSS("#cancel-op")), chromedp.WaitVisible(chromedp.CSS(`.notice`)))
	waitJS(t, ctx, `document.getElementById("op-state").textContent === "CANCELLED"`, "the operation cancelled")
	done := text(t, ctx, "#op-done")
	require.Contains(t, []string{"0", "1"}, done, "stopped between messages")
	require.EqualValues(t, 3, search(t, d, map[string][]string{"group": {payments}, "status": {"PENDING", "DEAD"}}).Total)
	require.EqualValues(t, 6, k.Records(t, "orders.events.v1"), "six republished")
}
