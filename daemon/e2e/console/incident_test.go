package console

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/daemon/wire"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// morePayments produces n more payments that were not JSON, from offset
// base on, as storm's.
func morePayments(t *testing.T, k *testsvc.KafkaBroker, base, n int) {
	t.Helper()
	for i := base; i < base+n; i++ {
		k.Kcat(t, fmt.Sprintf("payment %d: not json\n", i), "-P", "-t", "payments.dlq.v1",
			"-H", "__connect.errors.topic=payments.events.v1",
			"-H", "__connect.errors.exception.class.name=org.apache.kafka.connect.errors.DataException",
			"-H", fmt.Sprintf("__connect.errors.exception.message=Converting byte[] failed at offset %d", 1000+i))
	}
}

// messagesByID is every live dead letter's API JSON, by id.
func messagesByID(t *testing.T, d *testsvc.Daemon) map[string]string {
	t.Helper()
	var a apitest.Answer
	apitest.Record(d, &a).Search(t.Context(), url.Values{"limit": {"500"}})
	require.Equal(t, 200, a.Code)
	var body struct {
		Messages []json.RawMessage `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(a.Body, &body))
	out := map[string]string{}
	for _, m := range body.Messages {
		var id struct {
			ID string `json:"id"`
		}
		require.NoError(t, json.Unmarshal(m, &id))
		out[id.ID] = string(m)
	}
	return out
}

// In an incident the console answers "since when, how fast, still
// growing?" on its own: the overview's intake rate and each topic's first
// and last dead letter and arrivals, refreshed while the page is open
// (and not while paused); and a few messages picked by hand go through
// the usual preview into one bulk retry that touches nothing else.
func TestAnIncidentsPaceIsLiveAndPickedMessagesAreRetried(t *testing.T) {
	t.Parallel()
	k, d := stormDaemon(t, "")
	u, base := ui(t, d, nil)
	ctx := tab(t, 3*time.Minute)
	do(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#intake-rate")))
	require.Equal(t, "9", text(t, ctx, "#intake-day"))
	require.Equal(t, "9", text(t, ctx, "#intake-last-hour"))
	label, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#intake-rate svg").getAttribute("aria-label")`))
	require.NoError(t, err)
	require.Equal(t, "9 in the last 24 hours, per hour", label)

	do(t, ctx, chromedp.Click(chromedp.CSS(`nav a[href="/ui/dlq"]`)), chromedp.WaitVisible(chromedp.CSS("#topics")))
	row := `#topics tr[data-topic="payments.dlq.v1"]`
	require.Regexp(t, `ago$`, text(t, ctx, row+" [data-first-seen]"))
	require.Regexp(t, `ago$`, text(t, ctx, row+" [data-last-seen]"))
	label, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('`+row+` .arrivals svg').getAttribute("aria-label")`))
	require.NoError(t, err)
	require.Equal(t, "3 in the last 24 hours, per hour", label)
	pending := func() string { return text(t, ctx, row+` td[data-status="PENDING"]`) }
	require.Equal(t, "3", pending())

	// Live: three more arrive and the same page shows them, unreloaded.
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`window.sameDocument = true`))
	morePayments(t, k, 3, 3)
	waitJS(t, ctx, `window.sameDocument === true && document.querySelector('`+row+` td[data-status="PENDING"]').textContent.trim() === "6"`,
		"the topic's count to refresh itself")
	label, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('`+row+` .arrivals svg').getAttribute("aria-label")`))
	require.NoError(t, err)
	require.Equal(t, "6 in the last 24 hours, per hour", label)
	shot(t, ctx, "live-topics")

	// Paused: what arrives waits for the operator to resume.
	do(t, ctx, chromedp.Click(chromedp.CSS("#live-toggle")))
	require.Equal(t, "Live: paused", text(t, ctx, "#live-toggle"))
	morePayments(t, k, 6, 2)
	waitStored(t, d, 14)
	time.Sleep(7 * time.Second) // more than a refresh period: none may come
	require.Equal(t, "6", pending(), "a paused page does not refresh")
	do(t, ctx, chromedp.Click(chromedp.CSS("#live-toggle")))
	require.Equal(t, "Live: on", text(t, ctx, "#live-toggle"))
	waitJS(t, ctx, `window.sameDocument === true && document.querySelector('`+row+` td[data-status="PENDING"]').textContent.trim() === "8"`,
		"the count to refresh once resumed")

	// Two orders picked by hand: preview, retry, and nothing else moves.
	before := messagesByID(t, d)
	do(t, ctx, chromedp.Navigate(base+"/ui/dlq/search?topic=orders.dlq.v1&status=PENDING"), chromedp.WaitVisible(chromedp.CSS("#results")))
	disabled, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("bulk-selected-button").disabled`))
	require.NoError(t, err)
	require.True(t, disabled, "nothing selected, nothing to act on")
	picked, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("input.select-msg")).slice(1, 3).map(b => b.value)`))
	require.NoError(t, err)
	require.Len(t, picked, 2)
	for _, id := range picked {
		do(t, ctx, chromedp.Click(chromedp.CSS(`input.select-msg[value="`+id+`"]`)))
	}
	require.Equal(t, "2", text(t, ctx, "#selected-count"))
	shot(t, ctx, "selected-messages")
	do(t, ctx, chromedp.Click(chromedp.CSS("#bulk-selected-button")), chromedp.WaitVisible(chromedp.CSS("#bulk-form")))
	require.Equal(t, "2", text(t, ctx, "#bulk-selected"))
	do(t, ctx, chromedp.SetValue(chromedp.CSS("#b-action"), "retry"),
		chromedp.Click(chromedp.CSS("#bulk-preview")), chromedp.WaitVisible(chromedp.CSS("#bulk-preview-result")))
	require.Equal(t, "2", text(t, ctx, "#bulk-matched"))
	do(t, ctx, chromedp.Click(chromedp.CSS("#bulk-start")), chromedp.WaitVisible(chromedp.CSS("#op-progress")))
	waitJS(t, ctx, `document.getElementById("op-state") && document.getElementById("op-state").textContent === "COMPLETED"`, "the retry to end")
	require.Equal(t, "2", text(t, ctx, "#op-succeeded"))
	require.EqualValues(t, 2, k.Records(t, "orders.events.v1"), "the two picked, back on their topic")

	after := messagesByID(t, d)
	require.Len(t, after, len(before))
	for id, was := range before {
		if id == picked[0] || id == picked[1] {
			require.Contains(t, after[id], `"status":"RESOLVED"`)
			continue
		}
		require.Equal(t, was, after[id], "a message that was not picked is as it was")
	}
}

// The erasure actions an incident needs, from the tenant's page: the plan
// awaiting approval with its hash (the API's), a legal hold with its
// reason, approval, release, and a job that failed while its store was
// down shown with its next attempt and error, then run now. Other
// tenants' keys do not change.
func TestAnErasureIsApprovedHeldReleasedAndRetriedFromTheConsole(t *testing.T) {
	t.Parallel()
	rd := testsvc.RedisPersistent(t)
	rc := fillTenants(t, rd)
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Extra: approvalConfig(rd.Addr, "", `["s:{tenant}:*"]`)})
	others := redisDigest(t, rc)
	api := apitest.Client(d)
	job := func() wire.Job {
		j, err := api.Deletion(t.Context(), leaving)
		require.NoError(t, err)
		return j
	}
	u, base := ui(t, d, nil)
	ctx := tab(t, 3*time.Minute)
	page := base + "/ui/tenants/" + leaving
	do(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#main")),
		chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#confirm")),
		chromedp.SendKeys(chromedp.CSS("#confirm"), leaving), chromedp.Click(chromedp.CSS("#erase")),
		chromedp.WaitVisible(chromedp.CSS("#approval")))
	require.Equal(t, "AWAITING_APPROVAL", text(t, ctx, "#job-status"))
	plan, err := api.Plan(t.Context(), leaving)
	require.NoError(t, err)
	require.NotNil(t, plan.PlanHash)
	require.Equal(t, *plan.PlanHash, text(t, ctx, "#plan-hash"), "the hash shown is the plan's")
	require.Contains(t, text(t, ctx, "#plan"), "s:{tenant}:*")
	shot(t, ctx, "erasure-approval")

	// A hold, with its reason, before the approval: the job waits.
	const reason = "litigation hold, case 2026-114"
	do(t, ctx, chromedp.SendKeys(chromedp.CSS("#hold-reason-input"), reason), chromedp.Click(chromedp.CSS("#place-hold")),
		chromedp.WaitVisible(chromedp.CSS("#release")))
	require.Equal(t, reason, text(t, ctx, "#hold-reason"))
	do(t, ctx, chromedp.Click(chromedp.CSS("#approve")))
	waitJS(t, ctx, `!!document.querySelector(".notice") && document.querySelector(".notice").textContent.includes("approved")`, "the approval's notice")
	j := job()
	require.True(t, j.OnHold)
	require.NotNil(t, j.ApprovedAt)
	require.Equal(t, *plan.PlanHash, *j.PlanHash, "held to the approved plan")
	n, err := rc.Exists(t.Context(), "s:"+leaving+":0").Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "nothing is deleted while on hold")

	// Released while its store is down: the attempt fails and the job
	// waits an hour for the next, saying when and why.
	rd.Stop()
	do(t, ctx, chromedp.Click(chromedp.CSS("#release")), chromedp.WaitVisible(chromedp.CSS("#place-hold")))
	waitJS(t, ctx, `document.getElementById("job-status") && document.getElementById("job-status").textContent === "PARTIAL"`,
		"the attempt against the stopped store to fail")
	do(t, ctx, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#retry-now")))
	require.Regexp(t, `^in [0-9]+m`, text(t, ctx, "#next-attempt"))
	do(t, ctx, chromedp.Navigate(base+"/ui/tenants"), chromedp.WaitVisible(chromedp.CSS("#jobs")))
	jobRow := `#jobs tr[data-tenant="` + leaving + `"]`
	require.Regexp(t, `^in [0-9]+m`, text(t, ctx, jobRow+" [data-next-attempt]"))
	require.NotEmpty(t, strings.TrimSpace(text(t, ctx, jobRow+" .error-cell")), "the last error is listed")
	shot(t, ctx, "erasure-jobs")

	// As an operator would, wait for the store to answer the daemon again
	// (its client stops dialling a while after failures) before running it.
	rd.Start()
	testsvc.Eventually(t, time.Minute, func() bool {
		c, err := api.Counts(t.Context(), leaving)
		return err == nil && c.Complete
	}, "the deleter to reach Redis again")
	do(t, ctx, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#retry-now")), chromedp.Click(chromedp.CSS("#retry-now")))
	waitJS(t, ctx, `document.getElementById("job-status") && document.getElementById("job-status").textContent === "COMPLETED" && !!document.getElementById("job-verified")`,
		"the job run now to complete, verified")
	keys, err := rc.Keys(t.Context(), "s:"+leaving+":*").Result()
	require.NoError(t, err)
	require.Empty(t, keys, "the tenant's keys are gone")
	require.Equal(t, others, redisDigest(t, rc), "every other key is as it was")
}
