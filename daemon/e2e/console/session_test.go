package console

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// Issue 33 case 2: cookies are scoped by host, not by port, so a local
// user serving a page on another loopback port received the console's
// session cookie when the operator's browser visited it, replayed it, read
// the CSRF token from a page and made a change. Whatever the operator's
// browser sends to another port must not be enough to read or to act.
func TestWhatTheBrowserSendsToAnotherPortIsNoSession(t *testing.T) {
	t.Parallel()
	_, d := stormDaemon(t, "")
	u, base := ui(t, d, nil)
	ctx := tab(t, 2*time.Minute)
	do(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#dlq-depth")))
	do(t, ctx, chromedp.Navigate(base+"/ui/dlq"), chromedp.WaitVisible(chromedp.CSS(`a[href="/ui/dlq/search?topic=orders.dlq.v1"]`)))

	// The attacker's page, on another port of the console's own loopback
	// address, keeps every header the operator's browser sent it.
	var (
		mu   sync.Mutex
		sent []http.Header
	)
	console, err := url.Parse(base)
	require.NoError(t, err)
	l, err := net.Listen("tcp", net.JoinHostPort(console.Hostname(), "0"))
	require.NoError(t, err)
	evil := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, r.Header.Clone())
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<!doctype html><title>nothing to see</title><p id=evil>hello</p><img src=/pixel>")
	})}
	go evil.Serve(l)
	t.Cleanup(func() { evil.Close() })
	do(t, ctx, chromedp.Navigate("http://"+l.Addr().String()+"/"), chromedp.WaitVisible(chromedp.CSS("#evil")))

	mu.Lock()
	got := append([]http.Header(nil), sent...)
	mu.Unlock()
	require.NotEmpty(t, got, "the browser visited the attacker's page")
	csrfInPage := regexp.MustCompile(`"X-CSRF-Token": "([^"]+)"`)
	for _, h := range got {
		// Replay everything the browser gave away, as the console's own
		// origin would send it.
		req, err := http.NewRequest("GET", base+"/ui/dlq", nil)
		require.NoError(t, err)
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, 401, resp.StatusCode, "a page read with what the browser sent elsewhere: %s", page)
		require.NotContains(t, string(page), "orders.dlq.v1", "no dead-letter data")
		require.NotRegexp(t, csrfInPage, string(page), "no CSRF token")

		form := url.Values{"csrf": {"guessed"}}
		req, err = http.NewRequest("POST", base+"/ui/dlq/topics/orders.dlq.v1/pause", strings.NewReader(form.Encode()))
		require.NoError(t, err)
		for k, v := range h {
			req.Header[k] = v
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", base)
		resp, err = http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 401, resp.StatusCode, "a change made with what the browser sent elsewhere")
	}
	require.False(t, paused(t, d, "orders.dlq.v1"), "nothing changed")

	// The operator's own tab still works: back in the console, a page
	// loads and a change goes through.
	do(t, ctx, chromedp.Navigate(base+"/ui/dlq"), chromedp.WaitVisible(chromedp.CSS(`a[href="/ui/dlq/search?topic=orders.dlq.v1"]`)))
	require.Equal(t, 0, forge(t, ctx, "/ui/dlq/topics/orders.dlq.v1/pause", true), "a change from the console's own page")
	require.True(t, paused(t, d, "orders.dlq.v1"))

	// Links and forms go through the console's script (they carry the key);
	// the back button and a reload open the page again through the loader.
	cookies, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.cookie"))
	require.NoError(t, err)
	require.Empty(t, cookies, "the console sets no cookie")
	do(t, ctx, chromedp.Click(chromedp.CSS(`nav a[href="/ui/retention"]`)), chromedp.WaitVisible(chromedp.CSS(`nav a[href="/ui/retention"][aria-current="page"]`)))
	do(t, ctx, chromedp.NavigateBack(), chromedp.WaitVisible(chromedp.CSS(`a[href="/ui/dlq/search?topic=orders.dlq.v1"]`)))
	do(t, ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`a[href="/ui/dlq/search?topic=orders.dlq.v1"]`)))
}

// Found from outside (issue 33): the console's origin was 127.0.0.1 and a
// port, which a local user may have served before (a fixed --listen port,
// a port used again): a script cached for a year or a service worker left
// for that origin in the operator's browser then read the session key. By
// default the console's origin is a random address of 127.0.0.0/8 and a
// free port: new each time, and never 127.0.0.1.
func TestTheConsolesOriginIsNewEachTime(t *testing.T) {
	t.Parallel()
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{})
	seen := map[string]bool{}
	for i := 0; i < 3; i++ {
		cmd, u := startUI(t, d, nil, nil)
		parsed, err := url.Parse(u)
		require.NoError(t, err)
		ip := net.ParseIP(parsed.Hostname())
		require.True(t, ip.IsLoopback(), u)
		require.NotEqual(t, "127.0.0.", parsed.Hostname()[:len("127.0.0.")], "not an address other programs pick: %s", u)
		require.False(t, seen[parsed.Hostname()], "a new address each time: %s", u)
		seen[parsed.Hostname()] = true
		// The console answers there, in a browser.
		tb := tab(t, time.Minute)
		do(t, tb, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS(`nav a[href="/ui/dlq"]`)))
		// Opening the printed URL again keeps the browser's session.
		do(t, tb, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS(`nav a[href="/ui/dlq"]`)))
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}
}
