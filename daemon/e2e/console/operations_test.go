package console

import (
	"encoding/json"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

// The bulk operations page lists every operation, a finished one too
// (before, /ui/dlq/operations was a 404 and an operation was reachable only
// from the page that started it): its state, progress, outcomes and who
// started it; the state filter narrows the list; a running operation is
// cancelled from the list, and the list follows it to CANCELLED by itself.
func TestTheBulkOperationsPageListsFiltersAndCancels(t *testing.T) {
	t.Parallel()
	_, d := stormDaemon(t, "")
	start := func(action, filter string, rate float64) string {
		var op wire.Operation
		apitest.Expect(t, d, 202, &op).StartOperation(t.Context(), wire.OperationRequest{Action: action, Filter: json.RawMessage(filter), Rate: &rate})
		return op.ID
	}
	// One that finishes at once, one that runs (one message every 100 s).
	done := start("retry", `{"topic": "orders.dlq.v1"}`, 1000)
	require.Eventually(t, func() bool {
		var op wire.Operation
		apitest.Expect(t, d, 200, &op).Operation(t.Context(), done)
		return op.State == "COMPLETED"
	}, time.Minute, 100*time.Millisecond)
	slow := start("dead", `{"topic": "payments.dlq.v1"}`, 0.01)

	u, base := ui(t, d, nil)
	ctx := tab(t, 2*time.Minute)
	do(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#main")),
		chromedp.Click(chromedp.CSS(`nav a[href="/ui/dlq"]`)), chromedp.WaitVisible(chromedp.CSS("#operations-link")),
		chromedp.Click(chromedp.CSS("#operations-link")), chromedp.WaitVisible(chromedp.CSS("#operations")))
	row := func(id string) string { return fmt.Sprintf(`#operations tr[data-op="%s"]`, id) }
	require.Contains(t, text(t, ctx, row(done)), "COMPLETED")
	require.Contains(t, text(t, ctx, row(done)), "6/6")
	require.Contains(t, text(t, ctx, row(done)), "retried: 6")
	require.Contains(t, text(t, ctx, row(done)), "uid 0")
	require.Contains(t, text(t, ctx, row(slow)), "RUNNING")
	shot(t, ctx, "bulk-operations")

	do(t, ctx, chromedp.Navigate(base+"/ui/dlq/operations?state=COMPLETED"), chromedp.WaitVisible(chromedp.CSS("#operations")))
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#operations tbody tr").length`))
	require.NoError(t, err)
	require.Equal(t, 1, n, "only the completed one")
	require.Contains(t, text(t, ctx, row(done)), "COMPLETED")

	do(t, ctx, chromedp.Navigate(base+"/ui/dlq/operations?state=RUNNING"), chromedp.WaitVisible(chromedp.CSS(row(slow))),
		chromedp.Click(chromedp.CSS(row(slow)+" button.cancel-op")), chromedp.WaitVisible(chromedp.CSS("#op-progress")))
	do(t, ctx, chromedp.Navigate(base+"/ui/dlq/operations"), chromedp.WaitVisible(chromedp.CSS(row(slow))))
	waitJS(t, ctx, fmt.Sprintf(`document.querySelector('%s [data-state]').textContent === "CANCELLED"`, row(slow)),
		"the list to show the cancelled operation by itself")
	dead := search(t, d, url.Values{"topic": {"payments.dlq.v1"}, "status": {"DEAD"}}).Total
	require.LessOrEqual(t, dead, int64(1), "cancelled between messages: at most the first was marked DEAD")
}
