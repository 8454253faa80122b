package console

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// An operator triages the storm in the browser: a topic's counts, a
// search by error text (the URL is the search), a message with its
// payload and headers, and an edit replayed to another topic after its
// preview: the preview sends nothing, the replay sends exactly the edit,
// and the stored message is kept byte for byte, its history naming the
// replay.
func TestDeadLettersSearchOpenEditAndReplay(t *testing.T) {
	t.Parallel()
	k, d := stormDaemon(t, "")
	u, base := ui(t, d, nil)
	ctx := tab(t, 3*time.Minute)
	do(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#dlq-depth")))

	do(t, ctx, chromedp.Click(chromedp.CSS(`nav a[href="/ui/dlq"]`)), chromedp.WaitVisible(chromedp.CSS("#topics")))
	require.Equal(t, "6", text(t, ctx, `#topics tr[data-topic="orders.dlq.v1"] td[data-status="PENDING"]`))
	require.Equal(t, "3", text(t, ctx, `#topics tr[data-topic="payments.dlq.v1"] td[data-status="PENDING"]`))
	require.Contains(t, text(t, ctx, "#groups"), "duplicate key value violates unique constraint")
	shot(t, ctx, "dead-letters")

	// Search by error text, through the form.
	do(t, ctx,
		chromedp.Click(chromedp.CSS(`a[href="/ui/dlq/search"]`)), chromedp.WaitVisible(chromedp.CSS("#f-error")),
		chromedp.SendKeys(chromedp.CSS("#f-error"), "DUPLICATE KEY"),
		chromedp.Click(chromedp.CSS("#search-button")))
	// The page of the search itself, not the one before it (whose
	// #results, unfiltered, are visible too while the next one loads).
	waitJS(t, ctx, `new URLSearchParams(location.search).get("error") === "DUPLICATE KEY" && document.readyState === "complete" && !!document.querySelector("#results")`,
		"the search's page")
	want := search(t, d, url.Values{"error": {"DUPLICATE KEY"}})
	require.EqualValues(t, 6, want.Total)
	require.Equal(t, "6", text(t, ctx, "#result-total"))
	for _, m := range want.Messages {
		require.Contains(t, text(t, ctx, fmt.Sprintf(`#results tr[data-id="%s"]`, m.ID)), "duplicate key")
	}
	loc, err := chromedp.Run(ctx, chromedp.Location())
	require.NoError(t, err)
	shared, err := url.Parse(loc)
	require.NoError(t, err)
	require.Equal(t, "DUPLICATE KEY", shared.Query().Get("error"), "the search is in the URL, to share: %s", loc)
	shot(t, ctx, "search")

	// Pages by cursor: the next page link keeps the filters.
	var p1, p2 struct {
		Messages []struct {
			ID string `json:"id"`
		} `json:"messages"`
		NextCursor string `json:"next_cursor"`
	}
	apitest.Expect(t, d, 200, &p1).Search(t.Context(), url.Values{"error": {"DUPLICATE KEY"}, "limit": {"2"}})
	apitest.Expect(t, d, 200, &p2).Search(t.Context(), url.Values{"error": {"DUPLICATE KEY"}, "limit": {"2"}, "cursor": {p1.NextCursor}})
	do(t, ctx, chromedp.Navigate(base+"/ui/dlq/search?error=DUPLICATE+KEY&limit=2"),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#results tr[data-id="%s"]`, p1.Messages[0].ID))),
		chromedp.Click(chromedp.CSS("#next-page")),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#results tr[data-id="%s"]`, p2.Messages[0].ID))))
	require.Contains(t, text(t, ctx, "#results"), "duplicate key")
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#results tbody tr").length`))
	require.NoError(t, err)
	require.Equal(t, 2, n)

	// A filter the API refuses: its message and request id on the page.
	do(t, ctx, chromedp.Navigate(base+"/ui/dlq/search?since=last+tuesday"), chromedp.WaitVisible(chromedp.CSS(".error")))
	errText := text(t, ctx, ".error")
	require.Contains(t, errText, "SYS_DLQ_VALIDATION_ERROR")
	require.Contains(t, errText, "since")
	require.Regexp(t, `request req_[0-9a-f]+`, errText)
	do(t, ctx, chromedp.Navigate(loc), chromedp.WaitVisible(chromedp.CSS("#results")))

	// Open the oldest order (order-0).
	var oldest struct {
		Messages []struct {
			ID      string          `json:"id"`
			Payload json.RawMessage `json:"payload"`
		} `json:"messages"`
	}
	apitest.Expect(t, d, 200, &oldest).Search(t.Context(), url.Values{"topic": {"orders.dlq.v1"}, "order": {"oldest"}, "limit": {"1"}})
	id := oldest.Messages[0].ID
	var before apitest.Answer
	apitest.Record(d, &before).Message(t.Context(), id)
	do(t, ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#results tr[data-id="%s"] a`, id))),
		chromedp.WaitVisible(chromedp.CSS("#payload")))
	require.Contains(t, text(t, ctx, "#payload"), `"order_id": "ORD-0"`, "pretty JSON")
	require.Equal(t, "order-0", text(t, ctx, "#message-key"))
	require.Contains(t, text(t, ctx, "#headers"), "kafka_dlt-original-topic")
	require.Equal(t, "PENDING", text(t, ctx, "#message-status"))
	shot(t, ctx, "message")

	// Edit: another customer, to another topic. Preview first.
	edited := "{\n  \"order_id\": \"ORD-0\",\n  \"customer\": \"Zoë Fixed\",\n  \"amount\": 5\n}"
	do(t, ctx,
		chromedp.SetValue(chromedp.CSS("#r-payload"), edited),
		chromedp.SetValue(chromedp.CSS("#r-topic"), "orders.fixed.v1"),
		chromedp.SetValue(chromedp.CSS("#r-headers"), "trace=console-1"),
		chromedp.Click(chromedp.CSS("#preview-replay")), chromedp.WaitVisible(chromedp.CSS("#replay-preview")))
	require.Equal(t, "orders.fixed.v1", text(t, ctx, "#preview-topic"))
	require.Contains(t, text(t, ctx, "#preview-changed"), "payload")
	diff := text(t, ctx, "#preview-diff")
	require.Contains(t, diff, `-   "customer": "Zoë",`)
	require.Contains(t, diff, `+   "customer": "Zoë Fixed",`)
	require.Contains(t, diff, `    "order_id": "ORD-0",`, "an unchanged line")
	shot(t, ctx, "replay-preview")
	require.Zero(t, k.Records(t, "orders.fixed.v1"), "the preview sent nothing")

	do(t, ctx, chromedp.Click(chromedp.CSS("#send-replay")), chromedp.WaitVisible(chromedp.CSS("#replay-result")))
	replayID := text(t, ctx, "#replay-id")
	require.Contains(t, text(t, ctx, "#payload"), `"customer": "Zoë",`, "the page shows the stored payload, unchanged")
	require.Contains(t, text(t, ctx, "#history"), "replay")

	recs := consume(t, k, "orders.fixed.v1", 1)
	var got map[string]any
	require.NoError(t, json.Unmarshal(recs[0].Value, &got))
	require.Equal(t, map[string]any{"order_id": "ORD-0", "customer": "Zoë Fixed", "amount": 5.0}, got)
	require.Equal(t, "order-0", string(recs[0].Key))
	hdr := map[string]string{}
	for _, h := range recs[0].Headers {
		hdr[h.Key] = string(h.Value)
	}
	require.Equal(t, "console-1", hdr["trace"])
	require.Equal(t, id, hdr["x-dlq-replay-of"])
	require.Equal(t, replayID, hdr["x-dlq-replay-id"])
	var after apitest.Answer
	apitest.Record(d, &after).Message(t.Context(), id)
	require.JSONEq(t, string(before.Body), string(after.Body), "the stored message is unchanged")

	// The audit says it came through the console, as the uid of `lifecycled ui`.
	replay := apitest.PathOf(func(c *adminclient.Client) { c.Replay(t.Context(), id, nil, false) })
	testsvc.Eventually(t, 10*time.Second, func() bool {
		for _, line := range strings.Split(d.Logs(), "\n") {
			if strings.Contains(line, `"audit"`) && strings.Contains(line, replay) &&
				strings.Contains(line, `"via":"console"`) && strings.Contains(line, fmt.Sprintf(`"uid":%d`, os.Getuid())) {
				return true
			}
		}
		return false
	}, "an audit line of the replay via the console")

	// The search URL, shared, works in a new session of its own.
	u2, _ := ui(t, d, nil)
	ctx2 := tab(t, time.Minute)
	do(t, ctx2, chromedp.Navigate(u2), chromedp.WaitVisible(chromedp.CSS("#dlq-depth")),
		chromedp.Navigate(strings.Replace(loc, base, u2[:strings.Index(u2, "/ui/")], 1)), chromedp.WaitVisible(chromedp.CSS("#results")))
	require.Equal(t, "6", text(t, ctx2, "#result-total"))
}

// consume reads n records of a topic from its start.
func consume(t *testing.T, k *testsvc.KafkaBroker, topic string, n int) []*kgo.Record {
	t.Helper()
	c := k.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := testsvc.Context(t, 30*time.Second)
	var out []*kgo.Record
	for len(out) < n && ctx.Err() == nil {
		c.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	require.Len(t, out, n, "records on %s", topic)
	return out
}
