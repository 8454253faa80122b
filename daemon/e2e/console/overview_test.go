package console

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// onSocket is a GET of a console page on the daemon's socket, without the
// proxy of `lifecycled ui`: its status, headers and body.
func onSocket(t *testing.T, d *testsvc.Daemon, path string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://localhost"+path, nil)
	require.NoError(t, err)
	resp, err := d.HTTP().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, body
}

// get is a plain HTTP GET (no browser, no cookie) through the proxy.
func get(t *testing.T, u string) int {
	t.Helper()
	c := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(u)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// The overview through the URL `lifecycled ui` prints: the token becomes a
// session (and leaves the address bar), a topic's depth per status is the
// API's, health and plugins are shown; without the token or the session,
// and with the token a second time, the proxy answers 401.
func TestOverviewThroughLifecycledUI(t *testing.T) {
	t.Parallel()
	_, d := stormDaemon(t, "")
	// On the socket itself: the page, as HTML.
	code, hdr, body := onSocket(t, d, "/ui/")
	require.Equal(t, http.StatusOK, code, "%s", body)
	require.Equal(t, "text/html; charset=utf-8", hdr.Get("Content-Type"))
	require.Contains(t, string(body), "orders.dlq.v1")
	code, _, _ = onSocket(t, d, "/ui/no-such-page")
	require.Equal(t, http.StatusNotFound, code)

	u, base := ui(t, d, nil)

	requireStatus(t, http.StatusUnauthorized, get(t, base+"/ui/"), "no token, no session")
	requireStatus(t, http.StatusUnauthorized, get(t, base+"/ui/?token=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), "a wrong token")
	requireStatus(t, http.StatusOK, get(t, base+"/ui/static/session.js"), "the console's own files are the binary's: the page that opens a session loads them")

	ctx := tab(t, 2*time.Minute)
	orders := `#dlq-depth tr[data-topic="orders.dlq.v1"]`
	do(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS(orders)))
	require.Equal(t, "6", text(t, ctx, orders+` td[data-status="PENDING"]`))
	require.Equal(t, "0", text(t, ctx, orders+` td[data-status="DEAD"]`))
	require.Equal(t, "3", text(t, ctx, `#dlq-depth tr[data-topic="payments.dlq.v1"] td[data-status="PENDING"]`))
	require.Equal(t, "ok", text(t, ctx, "#readiness"))
	require.Contains(t, text(t, ctx, "#plugins"), "kafka")
	require.Contains(t, text(t, ctx, "#plugins"), "running")
	waitJS(t, ctx, `!location.search.includes("token")`, "the token leaves the address bar")
	shot(t, ctx, "overview")
	// A narrow window: the same page, nothing cut off sideways.
	do(t, ctx, chromedp.EmulateViewport(420, 900))
	wide, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
	require.NoError(t, err)
	require.False(t, wide, "the page fits a 420 px window")
	shot(t, ctx, "overview-narrow")
	do(t, ctx, chromedp.EmulateViewport(1280, 800))

	requireStatus(t, http.StatusUnauthorized, get(t, u), "the token works once")
	// The session goes on: a new page in the same tab, without the token.
	do(t, ctx, chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.CSS(orders)))
	loc, err := chromedp.Run(ctx, chromedp.Location())
	require.NoError(t, err)
	require.False(t, strings.Contains(loc, "token"), loc)
}
