package console

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

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
	p, err := NewProxy(sock, 1)
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
	plain := srv.Client()
	jar := &cookieJar{}
	browser := &http.Client{Jar: jar}

	for name, u := range map[string]string{
		"no token":      srv.URL + "/ui/",
		"wrong token":   srv.URL + "/ui/?token=" + strings.Repeat("A", 43),
		"static file":   srv.URL + "/ui/static/console.css",
		"empty token":   srv.URL + "/ui/?token=",
		"token, no /ui": srv.URL + "/api/v1/status?token=" + p.Token(),
	} {
		code, _ := do(t, plain, "GET", u, nil)
		require.Contains(t, []int{401, 404}, code, name)
		if name != "token, no /ui" {
			require.Equal(t, 401, code, name)
		}
	}

	code, s := do(t, browser, "GET", srv.URL+"/ui/dlq?topic=a&token="+p.Token(), nil)
	require.Equal(t, 200, code)
	require.Equal(t, "/ui/dlq", s.Path)
	require.Equal(t, "topic=a", s.Query, "the token is not forwarded")
	require.Equal(t, "localhost", s.Host)
	require.Len(t, s.CSRF, 43, "the session's CSRF token goes to the daemon")
	require.Empty(t, s.Cookie, "the session cookie stays in the proxy")

	code, _ = do(t, plain, "GET", srv.URL+"/ui/?token="+p.Token(), nil)
	require.Equal(t, 401, code, "the token works once")

	code, s2 := do(t, browser, "GET", srv.URL+"/ui/", map[string]string{CSRFHeader: "forged"})
	require.Equal(t, 200, code, "the session cookie works")
	require.Equal(t, s.CSRF, s2.CSRF, "a CSRF header from the browser is replaced by the session's")

	code, s3 := do(t, browser, "POST", srv.URL+"/ui/dlq/x", map[string]string{"Origin": srv.URL})
	require.Equal(t, 200, code, "a POST from the console's own origin")
	require.Empty(t, s3.Origin, "the Origin stays in the proxy (the daemon refuses browsers' requests)")
	code, _ = do(t, browser, "POST", srv.URL+"/ui/dlq/x", map[string]string{"Origin": "http://evil.example"})
	require.Equal(t, 403, code, "a POST from another origin")
	code, _ = do(t, browser, "POST", srv.URL+"/ui/dlq/x", map[string]string{"Sec-Fetch-Site": "cross-site"})
	require.Equal(t, 403, code, "a cross-site POST without an Origin")
}

// cookieJar keeps cookies by name, whatever the host: enough for one
// test server.
type cookieJar struct{ c []*http.Cookie }

func (j *cookieJar) SetCookies(_ *url.URL, cs []*http.Cookie) { j.c = append(j.c, cs...) }
func (j *cookieJar) Cookies(*url.URL) []*http.Cookie          { return j.c }
