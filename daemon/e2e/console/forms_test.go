package console

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"regexp"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// posted is the answer to a POST made from the page: status 0 is a
// redirect (the action was done), Errors the codes and messages shown.
type posted struct {
	Status int    `json:"status"`
	Body   string `json:"body"`
}

var errorRE = regexp.MustCompile(`(?s)<div class="error" role="alert"><strong>([^<]*)</strong>.*?<span class="error-message">(.*?)</span>`)

// Errors are the console's error boxes: "CODE: message".
func (p posted) Errors() []string {
	var out []string
	for _, m := range errorRE.FindAllStringSubmatch(p.Body, -1) {
		out = append(out, m[1]+": "+html.UnescapeString(m[2]))
	}
	return out
}

// post makes a POST from the page as a form would: fields as pairs,
// the CSRF token in the body (bodyToken) and/or in the X-CSRF-Token
// header (what htmx adds to a boosted form), plus n random UUIDs as id.
func post(t *testing.T, ctx context.Context, path string, bodyToken, headerToken bool, randomIDs int, fields ...string) posted {
	t.Helper()
	var pairs [][2]string
	for i := 0; i+1 < len(fields); i += 2 {
		pairs = append(pairs, [2]string{fields[i], fields[i+1]})
	}
	pj, err := json.Marshal(pairs)
	require.NoError(t, err)
	js := fmt.Sprintf(`(async () => {
		const tok = JSON.parse(document.body.getAttribute("hx-headers"))["X-CSRF-Token"];
		const body = new URLSearchParams();
		for (const [k, v] of %s) body.append(k, v);
		if (%v) body.append("csrf", tok);
		for (let i = 0; i < %d; i++) body.append("id", crypto.randomUUID());
		const headers = {"X-Lifecycled-Session": localStorage.getItem("lifecycled-console-session")};
		if (%v) headers["X-CSRF-Token"] = tok;
		const r = await fetch(%q, {method: "POST", body, headers, redirect: "manual"});
		return {status: r.status, body: r.type === "opaqueredirect" ? "" : await r.text()};
	})()`, pj, bodyToken, randomIDs, headerToken, path)
	out, err := chromedp.Run(ctx, chromedp.Evaluate[posted](js, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	return out
}

// operationsCount is how many bulk operations the daemon has.
func operationsCount(t *testing.T, d *testsvc.Daemon) int {
	t.Helper()
	var ops struct {
		Operations []json.RawMessage `json:"operations"`
	}
	apitest.Expect(t, d, 200, &ops).Operations(t.Context(), nil)
	return len(ops.Operations)
}

// sameMessages requires every live message's API JSON to be as before.
func sameMessages(t *testing.T, d *testsvc.Daemon, before map[string]string, what string) {
	t.Helper()
	after := messagesByID(t, d)
	require.Len(t, after, len(before), what)
	for id, was := range before {
		require.Equal(t, was, after[id], "%s: message %s", what, id)
	}
}
