package console

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
)

// a bulk form naming ids beside a filter (an
// order's id, a filter on the payments topic) is refused, as the API
// refuses both; the console must not drop the filter and act on the ids.
func TestBulkIDsBesideAFilterAreRefused(t *testing.T) {
	t.Parallel()
	_, d := stormDaemon(t, "")
	u, _ := ui(t, d, nil)
	ctx := tab(t, 3*time.Minute)
	do(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#dlq-depth")))
	order := search(t, d, map[string][]string{"topic": {"orders.dlq.v1"}, "limit": {"1"}}).Messages[0].ID
	before := messagesByID(t, d)

	p := post(t, ctx, "/ui/dlq/bulk", true, false, 0, "once", "k-both", "action", "dead", "start", "1",
		"id", order, "filter", "topic=payments.dlq.v1")
	t.Logf("ids and a filter, start: %d %q", p.Status, p.Errors())
	require.Zero(t, operationsCount(t, d), "ids beside a filter: no operation started")
	sameMessages(t, d, before, "ids beside a filter")
	require.Equal(t, 400, p.Status)
}

// more ids than a form can carry (20,001: Go
// parses no form of more than 10,000 fields) is refused saying so, not
// as a missing action or a missing CSRF token; nothing changes. Duplicates
// count once; a non-UUID is refused naming it.
func TestBulkTooManyIDsSaySo(t *testing.T) {
	t.Parallel()
	_, d := stormDaemon(t, "")
	u, _ := ui(t, d, nil)
	ctx := tab(t, 3*time.Minute)
	do(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#dlq-depth")))
	order := search(t, d, map[string][]string{"topic": {"orders.dlq.v1"}, "limit": {"1"}}).Messages[0].ID
	before := messagesByID(t, d)

	p := post(t, ctx, "/ui/dlq/bulk", false, false, 0, "once", "k-uuid", "action", "dead", "start", "1", "csrf", "", "id", "not-a-uuid")
	require.Equal(t, 403, p.Status, "an empty token is no token")
	p = post(t, ctx, "/ui/dlq/bulk", true, false, 0, "once", "k-uuid", "action", "dead", "start", "1", "id", "not-a-uuid")
	require.Equal(t, 400, p.Status)
	require.Contains(t, strings.Join(p.Errors(), "\n"), `"not-a-uuid" is not a message id`)
	require.Zero(t, operationsCount(t, d))
	sameMessages(t, d, before, "a non-UUID")

	var msgs []string
	for _, tc := range []struct {
		name        string
		body, hdr   bool
		wantRefused string
	}{
		{"token in the body", true, false, "id"},
		{"token in the header, as htmx sends a boosted form", false, true, "id"},
	} {
		p := post(t, ctx, "/ui/dlq/bulk", tc.body, tc.hdr, 20001, "once", "k-many", "action", "dead", "start", "1")
		t.Logf("20,001 ids, %s: %d %q", tc.name, p.Status, p.Errors())
		require.GreaterOrEqual(t, p.Status, 400, tc.name)
		require.Zero(t, operationsCount(t, d), tc.name)
		sameMessages(t, d, before, tc.name)
		msgs = append(msgs, tc.name+": "+strings.Join(p.Errors(), "; "))
	}
	for _, m := range msgs {
		require.NotContains(t, m, "CSRF", "the refusal names the ids, not the token: %s", m)
		require.NotContains(t, m, "invalid action", "the refusal names the ids, not the action that was sent: %s", m)
	}

	// Duplicates count once.
	p = post(t, ctx, "/ui/dlq/bulk", true, false, 0, "once", "k-dup", "action", "dead", "start", "1", "id", order, "id", order, "id", " "+order+" ")
	require.Equal(t, 0, p.Status, "started (a redirect)")
	var ops struct {
		Operations []struct {
			Matched int64 `json:"matched"`
		} `json:"operations"`
	}
	apitest.Expect(t, d, 200, &ops).Operations(t.Context(), nil)
	require.Len(t, ops.Operations, 1)
	require.EqualValues(t, 1, ops.Operations[0].Matched)
}
