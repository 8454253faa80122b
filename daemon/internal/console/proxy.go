package console

import (
	"context"
	"crypto/rand"
	"encoding/base64"
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
// one-time token into a session key held in the console origin's storage
// (see session.go), refuses every request without it (401), checks that
// mutating requests come from its own origin, and hands the session's CSRF
// token to the daemon, which puts it in its forms and checks it on every
// mutation.
type Proxy struct {
	token string
	rp    *httputil.ReverseProxy

	mu        sync.Mutex
	tokenUsed bool
	sessions  map[string]string // session key -> CSRF token
}

// NewProxy forwards to the admin socket at socketPath.
func NewProxy(socketPath string) (*Proxy, error) {
	token, err := randomToken()
	if err != nil {
		return nil, err
	}
	p := &Proxy{token: token, sessions: map[string]string{}}
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
	// The console's own files are in the binary every local user can
	// read; the page that opens a session needs them before it has one.
	if strings.HasPrefix(r.URL.Path, "/ui/static/") && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		p.forward(w, r, "")
		return
	}
	csrf, ok := p.session(w, r)
	if !ok {
		return
	}
	if isMutating(r.Method) && !sameOrigin(r) {
		http.Error(w, "lifecycled ui: a mutating request from another origin is refused", http.StatusForbidden)
		return
	}
	p.forward(w, r, csrf)
}

// forward sends the request on to the daemon with the session's CSRF
// token (none for the console's files). The session key, cookies and the
// browser's origin stay here: the daemon refuses requests with an Origin
// (its API is not for browsers) and has no use for the rest.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, csrf string) {
	out := r.Clone(r.Context())
	for _, h := range []string{"Cookie", "Origin", "Referer", CSRFHeader, SessionHeader, "X-Forwarded-For", "Forwarded"} {
		out.Header.Del(h)
	}
	if csrf != "" {
		out.Header.Set(CSRFHeader, csrf)
	}
	p.rp.ServeHTTP(w, out)
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
