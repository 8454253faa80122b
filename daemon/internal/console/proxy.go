package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Proxy is the browser's way to the console: `lifecycled ui` serves it on
// a loopback port and forwards to the admin socket, as the uid that runs
// it (so the daemon's access policy and audit see that uid). It turns a
// one-time token into a session cookie, refuses every request without the
// session (401), checks that mutating requests come from its own origin,
// and hands the session's CSRF token to the daemon, which puts it in its
// forms and checks it on every mutation.
type Proxy struct {
	token      string
	cookieName string
	rp         *httputil.ReverseProxy

	mu        sync.Mutex
	tokenUsed bool
	sessions  map[string]string // session id -> CSRF token
}

// NewProxy forwards to the admin socket at socketPath. port names the
// session cookie (cookies are per host, not per port: two consoles on one
// machine must not share one).
func NewProxy(socketPath string, port int) (*Proxy, error) {
	token, err := randomToken()
	if err != nil {
		return nil, err
	}
	p := &Proxy{token: token, cookieName: fmt.Sprintf("lifecycled_console_%d", port), sessions: map[string]string{}}
	p.rp = &httputil.ReverseProxy{
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", socketPath)
			},
			MaxIdleConns:    8,
			IdleConnTimeout: 30 * time.Second,
		},
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = "http", "localhost", "localhost"
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, "lifecycled ui: the daemon's admin socket does not answer: "+err.Error(), http.StatusBadGateway)
		},
	}
	return p, nil
}

// Token is the one-time token of the URL to open.
func (p *Proxy) Token() string { return p.token }

func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if r.URL.Path == "/" {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		return
	}
	// Only the console: the API stays on the socket, for the CLI.
	if r.URL.Path != "/ui" && !strings.HasPrefix(r.URL.Path, "/ui/") {
		http.Error(w, "lifecycled ui serves the console under /ui/ only", http.StatusNotFound)
		return
	}
	csrf, setCookie, ok := p.session(r)
	if !ok {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintln(w, "401: no console session. Open the URL that `lifecycled ui` printed (its token works once), or start `lifecycled ui` again.")
		return
	}
	if setCookie != nil {
		http.SetCookie(w, setCookie)
	}
	if isMutating(r.Method) && !sameOrigin(r) {
		http.Error(w, "lifecycled ui: a mutating request from another origin is refused", http.StatusForbidden)
		return
	}
	out := r.Clone(r.Context())
	q := out.URL.Query()
	if q.Has("token") {
		q.Del("token")
		out.URL.RawQuery = q.Encode()
	}
	// The session cookie and the browser's origin stay here: the daemon
	// refuses requests with an Origin (its API is not for browsers) and
	// has no use for the cookie.
	for _, h := range []string{"Cookie", "Origin", "Referer", CSRFHeader, "X-Forwarded-For", "Forwarded"} {
		out.Header.Del(h)
	}
	out.Header.Set(CSRFHeader, csrf)
	p.rp.ServeHTTP(w, out)
}

// session finds the caller's session from its cookie, or makes one from
// the one-time token (and returns the cookie to set).
func (p *Proxy) session(r *http.Request) (csrf string, set *http.Cookie, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, err := r.Cookie(p.cookieName); err == nil {
		for id, tok := range p.sessions {
			if subtle.ConstantTimeCompare([]byte(id), []byte(c.Value)) == 1 {
				return tok, nil, true
			}
		}
	}
	tok := r.URL.Query().Get("token")
	if tok == "" || p.tokenUsed || subtle.ConstantTimeCompare([]byte(tok), []byte(p.token)) != 1 {
		return "", nil, false
	}
	id, err1 := randomToken()
	csrf, err2 := randomToken()
	if err1 != nil || err2 != nil {
		return "", nil, false
	}
	p.tokenUsed = true
	p.sessions[id] = csrf
	return csrf, &http.Cookie{Name: p.cookieName, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode}, true
}

func isMutating(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}

// sameOrigin accepts a request whose Origin (or, without one, Sec-Fetch-Site)
// says it comes from a page of this proxy: through an SSH tunnel the host
// the browser sees is not ours, so the Origin is compared with the Host the
// browser sent.
func sameOrigin(r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		return err == nil && u.Host == r.Host
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
		return true
	}
	return false
}
