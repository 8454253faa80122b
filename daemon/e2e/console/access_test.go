package console

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// forge makes a POST from the page itself, as a script of the console's
// origin could (with the session key from its storage), with the page's
// CSRF token or without it, and returns the status.
func forge(t *testing.T, ctx context.Context, path string, withToken bool, fields ...string) int {
	t.Helper()
	form := map[string]string{}
	for i := 0; i+1 < len(fields); i += 2 {
		form[fields[i]] = fields[i+1]
	}
	extra, err := json.Marshal(form)
	require.NoError(t, err)
	js := fmt.Sprintf(`(async () => {
		const tok = JSON.parse(document.body.getAttribute("hx-headers"))["X-CSRF-Token"];
		const body = new URLSearchParams(Object.assign(%v ? {csrf: tok} : {}, %s));
		const headers = {"X-Lifecycled-Session": localStorage.getItem("lifecycled-console-session")};
		const r = await fetch(%q, {method: "POST", body, headers, redirect: "manual"});
		return r.status;
	})()`, withToken, extra, path)
	code, err := chromedp.Run(ctx, chromedp.Evaluate[int](js, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	return code
}

// A uid in read_only_uids sees the console without a single control, and
// a POST forged from the page, CSRF token and all, is refused by the
// daemon: nothing changes.
func TestReadOnlyUIDSeesNoControlsAndIsRefused(t *testing.T) {
	t.Parallel()
	admin := fmt.Sprintf("allow_uids = [%d]\nread_only_uids = [%d]", os.Getuid()+4242, os.Getuid())
	_, d := stormDaemon(t, admin)
	one := search(t, d, map[string][]string{"topic": {"orders.dlq.v1"}, "limit": {"1"}})
	id := one.Messages[0].ID
	var before, historyBefore apitest.Answer
	apitest.Record(d, &before).Message(t.Context(), id)
	apitest.Record(d, &historyBefore).History(t.Context(), id)

	u, base := ui(t, d, nil)
	ctx := tab(t, 2*time.Minute)
	do(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#readonly")))
	for _, page := range []string{"/ui/", "/ui/dlq", "/ui/dlq/search?topic=orders.dlq.v1", "/ui/dlq/messages/" + id,
		"/ui/dlq/bulk?group=" + one.Messages[0].Group, "/ui/tenants", "/ui/tenants/" + leaving, "/ui/retention"} {
		do(t, ctx, chromedp.Navigate(base+page), chromedp.WaitVisible(chromedp.CSS("#readonly")))
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("form[method=post], button:not([type=submit][form]):not(#live-toggle), textarea").length - document.querySelectorAll("form[method=get] button").length`))
		require.NoError(t, err)
		require.Zero(t, n, "%s shows no mutating control to a read-only uid (the Live button changes nothing on the daemon)", page)
		if page == "/ui/dlq/messages/"+id {
			shot(t, ctx, "read-only")
		}
	}

	require.Equal(t, 403, forge(t, ctx, "/ui/dlq/messages/"+id+"/retry", true), "a forged retry")
	require.Equal(t, 403, forge(t, ctx, "/ui/dlq/messages/"+id+"/delete", true), "a forged delete")
	require.Equal(t, 403, forge(t, ctx, "/ui/dlq/topics/orders.dlq.v1/pause", true), "a forged pause")
	require.Equal(t, 403, forge(t, ctx, "/ui/tenants/"+leaving+"/erase", true), "a forged erasure")
	var after, historyAfter apitest.Answer
	apitest.Record(d, &after).Message(t.Context(), id)
	require.JSONEq(t, string(before.Body), string(after.Body), "the message is unchanged")
	apitest.Record(d, &historyAfter).History(t.Context(), id)
	require.JSONEq(t, string(historyBefore.Body), string(historyAfter.Body), "nothing was recorded")
	code, _ := apitest.Refused(apitest.Client(d).Deletion(t.Context(), leaving))(t)
	require.Equal(t, 404, code, "no erasure")
	for _, topic := range []string{"orders.dlq.v1", "payments.dlq.v1"} {
		require.False(t, paused(t, d, topic), "%s is not paused", topic)
	}
}

// A full-access session must still carry the CSRF token: a POST without
// it is refused and changes nothing; with it, the same POST works.
func TestMutationsNeedTheCSRFToken(t *testing.T) {
	t.Parallel()
	_, d := stormDaemon(t, "")
	u, _ := ui(t, d, nil)
	ctx := tab(t, time.Minute)
	do(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#dlq-depth")))
	require.Equal(t, 403, forge(t, ctx, "/ui/dlq/topics/orders.dlq.v1/pause", false))
	require.False(t, paused(t, d, "orders.dlq.v1"), "refused without the token")
	require.Equal(t, 0, forge(t, ctx, "/ui/dlq/topics/orders.dlq.v1/pause", true), "with the token: a redirect (opaque to fetch)")
	require.True(t, paused(t, d, "orders.dlq.v1"), "done with the token")

	// A form sent twice (a double click) is one change: its key, made with
	// the page, is the Idempotency-Key of the API call.
	group := search(t, d, map[string][]string{"topic": {"payments.dlq.v1"}, "limit": {"1"}}).Messages[0].Group
	for i := 0; i < 2; i++ {
		require.Equal(t, 0, forge(t, ctx, "/ui/dlq/bulk", true, "once", "form-1", "start", "1", "action", "dead",
			"filter", "group="+group+"&status=PENDING"), "a redirect to the operation")
	}
	var ops struct {
		Operations []struct {
			ID string `json:"id"`
		} `json:"operations"`
	}
	apitest.Expect(t, d, 200, &ops).Operations(t.Context(), nil)
	require.Len(t, ops.Operations, 1, "one operation for the form sent twice")
}

// paused says whether the API reports the automatic retries of topic
// paused.
func paused(t *testing.T, d *testsvc.Daemon, topic string) bool {
	t.Helper()
	var topics struct {
		Topics []struct {
			Topic  string `json:"topic"`
			Paused any    `json:"paused"`
		} `json:"topics"`
	}
	apitest.Expect(t, d, 200, &topics).Topics(t.Context())
	for _, tp := range topics.Topics {
		if tp.Topic == topic {
			return tp.Paused != nil
		}
	}
	return false
}
