package console

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/stretchr/testify/require"
)

// seen is what the fake daemon behind the proxy received.
type seen struct {
	Method, Path, Query, Host, CSRF, Cookie, Origin string
}

// proxyToFake serves a Proxy in front of a Unix socket whose server
// answers with what it received.
func proxyToFake(t *testing.T) (*Proxy, *httptest.Server) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "admin.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	fake := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Host, r.Header.Get(CSRFHeader), r.Header.Get("Cookie"), r.Header.Get("Origin")})
	})}
	go fake.Serve(l)
	t.Cleanup(func() { fake.Close() })
	p, err := NewProxy(sock)
	require.NoError(t, err)
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, srv
}

func do(t *testing.T, c *http.Client, method, u string, hdr map[string]string) (int, seen) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader("csrf=x"))
	require.NoError(t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var s seen
	if resp.StatusCode == 200 {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&s))
	}
	return resp.StatusCode, s
}

func TestProxySessionFromOneTimeToken(t *testing.T) {
	p, srv := proxyToFake(t)
	c := srv.Client()

	for name, u := range map[string]string{
		"no token":      srv.URL + "/ui/",
		"wrong token":   srv.URL + "/ui/?token=" + strings.Repeat("A", 43),
		"empty token":   srv.URL + "/ui/?token=",
		"token, no /ui": srv.URL + adminclient.APIPrefix + "status?token=" + p.Token(),
	} {
		code, _ := do(t, c, "GET", u, nil)
		require.Contains(t, []int{401, 404}, code, name)
		if name != "token, no /ui" {
			require.Equal(t, 401, code, name)
		}
	}
	code, s := do(t, c, "GET", srv.URL+"/ui/static/console.css", map[string]string{CSRFHeader: "forged"})
	require.Equal(t, 200, code, "the console's own files need no session")
	require.Empty(t, s.CSRF, "and carry no CSRF token")

	// The token is exchanged for a key, in the loader page only.
	resp, err := c.Get(srv.URL + "/ui/dlq?topic=a&token=" + p.Token())
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	require.Empty(t, resp.Cookies(), "no cookie: a cookie is not port-scoped")
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "script-src 'self'")
	key := regexp.MustCompile(`name="lifecycled-session" content="([A-Za-z0-9_-]{43})"`).FindStringSubmatch(string(page))
	require.Len(t, key, 2, "the loader holds the key: %s", page)
	session := map[string]string{SessionHeader: key[1]}

	code, _ = do(t, c, "GET", srv.URL+"/ui/?token="+p.Token(), nil)
	require.Equal(t, 401, code, "the token works once")

	code, s = do(t, c, "GET", srv.URL+"/ui/dlq?topic=a", session)
	require.Equal(t, 200, code)
	require.Equal(t, "/ui/dlq", s.Path)
	require.Equal(t, "topic=a", s.Query)
	require.Equal(t, "localhost", s.Host)
	require.Len(t, s.CSRF, 43, "the session's CSRF token goes to the daemon")

	code, s2 := do(t, c, "GET", srv.URL+"/ui/", map[string]string{SessionHeader: key[1], CSRFHeader: "forged", "Cookie": "a=b"})
	require.Equal(t, 200, code, "the key works again")
	require.Equal(t, s.CSRF, s2.CSRF, "a CSRF header from the browser is replaced by the session's")
	require.Empty(t, s2.Cookie, "cookies stay in the proxy")

	code, _ = do(t, c, "GET", srv.URL+"/ui/", map[string]string{SessionHeader: strings.Repeat("B", 43)})
	require.Equal(t, 401, code, "an unknown key")
	code, _ = do(t, c, "GET", srv.URL+"/ui/progress", map[string]string{"HX-Request": "true"})
	require.Equal(t, 401, code, "an htmx request without the key")
	code, _ = do(t, c, "POST", srv.URL+"/ui/dlq/x", map[string]string{"Origin": srv.URL})
	require.Equal(t, 401, code, "a POST without the key")

	code, s3 := do(t, c, "POST", srv.URL+"/ui/dlq/x", map[string]string{SessionHeader: key[1], "Origin": srv.URL})
	require.Equal(t, 200, code, "a POST from the console's own origin")
	require.Empty(t, s3.Origin, "the Origin stays in the proxy (the daemon refuses browsers' requests)")
	code, _ = do(t, c, "POST", srv.URL+"/ui/dlq/x", map[string]string{SessionHeader: key[1], "Origin": "http://evil.example"})
	require.Equal(t, 403, code, "a POST from another origin")
	code, _ = do(t, c, "POST", srv.URL+"/ui/dlq/x", map[string]string{SessionHeader: key[1], "Sec-Fetch-Site": "cross-site"})
	require.Equal(t, 403, code, "a cross-site POST without an Origin")
}
