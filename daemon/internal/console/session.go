package console

import (
	"crypto/subtle"
	"html/template"
	"net/http"
)

// SessionHeader carries the console session's key on every request the
// browser makes.
//
// The key lives in the console origin's localStorage, never in a cookie:
// cookies are scoped by host, not by port, so a browser hands a cookie
// for 127.0.0.1 to any other local user's server on another loopback port,
// who could replay it. Storage is scoped by origin (scheme, host and port),
// and a header is only sent by the console's own script. A navigation
// (typing a URL, a reload, a new tab) carries no header: it gets the
// loader page, which holds no data and fetches the page with the key.
const SessionHeader = "X-Lifecycled-Session"

// loaderPage opens the console in a navigation: static/session.js stores
// the key the one-time token was exchanged for (Key, only in the answer to
// that token) and fetches the page the address names with the key.
var loaderPage = template.Must(template.New("loader").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="lifecycled-loader" content="1">
{{if .}}<meta name="lifecycled-session" content="{{.}}">
{{end}}<title>lifecycled</title>
<link rel="stylesheet" href="/ui/static/console.css">
<script src="/ui/static/session.js"></script>
</head>
<body>
<main id="main"><p id="session-status" role="status">Opening the console…</p>
<noscript><p>The console needs JavaScript: its session is kept by this page's origin, not in a cookie.</p></noscript></main>
</body>
</html>`))

// session finds the caller's session from its key, or opens one from the
// one-time token. When there is none it answers the request itself and
// returns false.
func (p *Proxy) session(w http.ResponseWriter, r *http.Request) (csrf string, ok bool) {
	if key := r.Header.Get(SessionHeader); key != "" {
		if csrf, ok := p.lookup(key); ok {
			return csrf, true
		}
		noSession(w, "the console session is not known to this `lifecycled ui` (it was started again?)")
		return "", false
	}
	if r.URL.Query().Has("token") {
		key, ok := p.redeem(r.URL.Query().Get("token"))
		if !ok && isNavigation(r) {
			// The printed URL opened again: a browser that holds the
			// session goes on with it; the loader says so otherwise.
			serveLoader(w, http.StatusUnauthorized, "")
			return "", false
		}
		if !ok {
			noSession(w, "the token is not this console's, or it was used already")
			return "", false
		}
		serveLoader(w, http.StatusOK, key)
		return "", false
	}
	// A navigation: the loader, which holds nothing, asks again with the
	// key. 401 tells any other client that it has no session.
	if isNavigation(r) {
		serveLoader(w, http.StatusUnauthorized, "")
		return "", false
	}
	noSession(w, "the request carries no console session")
	return "", false
}

func (p *Proxy) lookup(key string) (csrf string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, tok := range p.sessions {
		if subtle.ConstantTimeCompare([]byte(k), []byte(key)) == 1 {
			return tok, true
		}
	}
	return "", false
}

// redeem exchanges the one-time token for a new session's key.
func (p *Proxy) redeem(token string) (key string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if token == "" || p.tokenUsed || subtle.ConstantTimeCompare([]byte(token), []byte(p.token)) != 1 {
		return "", false
	}
	key, err1 := randomToken()
	csrf, err2 := randomToken()
	if err1 != nil || err2 != nil {
		return "", false
	}
	p.tokenUsed = true
	p.sessions[key] = csrf
	return key, true
}

func serveLoader(w http.ResponseWriter, code int, key string) {
	securityHeaders(w.Header())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_ = loaderPage.Execute(w, key)
}

func noSession(w http.ResponseWriter, why string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write([]byte("401: no console session: " + why + ". Open the URL that `lifecycled ui` printed (its token works once), or start `lifecycled ui` again.\n"))
}

// isNavigation: a request the browser makes by itself (no header of the
// console's script can be on it).
func isNavigation(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.Header.Get("HX-Request") == ""
}
