package console

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

// A cancel asked while a page of retries waits for the broker says so:
// the operation stays RUNNING, and its page names the daemon that holds
// it and how many messages may be under way, until that page's outcomes
// are recorded; then it ends, and each message the page sent reached the
// broker once.
func TestACancelInProgressSaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	k, d := stormDaemon(t, "")
	k.SlowProduce(6 * time.Second)
	var op wire.Operation
	apitest.Expect(t, d, 202, &op).StartOperation(t.Context(), wire.OperationRequest{Action: "retry", Filter: json.RawMessage(`{"topic": "orders.dlq.v1"}`)})

	u, base := ui(t, d, nil)
	ctx := tab(t, 2*time.Minute)
	do(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#main")),
		chromedp.Navigate(base+"/ui/dlq/operations/"+op.ID), chromedp.WaitVisible(chromedp.CSS("#cancel-op")),
		chromedp.Click(chromedp.CSS("#cancel-op")), chromedp.WaitVisible(chromedp.CSS("#op-cancel-pending")))
	notice := text(t, ctx, "#op-cancel-pending")
	require.Contains(t, notice, "Cancelling")
	require.Contains(t, notice, "reads no new page")
	require.Contains(t, notice, "at most 1000 messages", "four pages of 250 may be under way")
	require.Equal(t, "RUNNING", text(t, ctx, "#op-state"))
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#cancel-op").length`))
	require.NoError(t, err)
	require.Zero(t, n, "no second cancel")
	shot(t, ctx, "bulk-cancelling")

	// It ends once the page under way is recorded: CANCELLED, or
	// COMPLETED when that page held every message of the set.
	waitJS(t, ctx, `document.getElementById("op-state") && document.getElementById("op-state").textContent !== "RUNNING"`,
		"the operation to end once the page under way is recorded")
	var end wire.Operation
	apitest.Expect(t, d, 200, &end).Operation(t.Context(), op.ID)
	require.Contains(t, []string{"CANCELLED", "COMPLETED"}, end.State)
	require.NotNil(t, end.CancelRequestedAt)
	require.EqualValues(t, end.Succeeded, k.Records(t, "orders.events.v1"), "each message the page sent reached the broker once")
}
