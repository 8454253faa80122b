// Package console is lifecycled's web console: server-rendered pages under
// /ui/ on the admin socket, a view of the admin API for operators who would
// rather look than read JSON. Every page and every action calls the API's
// own handlers in the process (through the same middleware: access policy,
// idempotency, audit), so the console has no second implementation of any
// rule; it only renders what the API answers. Browsers reach it through
// `lifecycled ui` (Proxy), which holds the session and the CSRF token.
package console

import (
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"sync"

	"github.com/hashicorp/go-hclog"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options configures a Console.
type Options struct {
	Logger hclog.Logger
	// MayMutate says whether the caller of r may make mutating requests
	// under the admin socket's access policy; the console shows its
	// controls only then (the API refuses the others all the same).
	MayMutate func(r *http.Request) bool
}

// Console serves the pages. SetAPI must be called before it serves.
type Console struct {
	opts  Options
	log   hclog.Logger
	mu    sync.RWMutex
	api   http.Handler
	pages map[string]*template.Template
}

// New parses the embedded templates; a broken template is a build error
// that the package's tests catch, so New panics on it.
func New(o Options) *Console {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	c := &Console{opts: o, log: o.Logger.Named("console"), pages: map[string]*template.Template{}}
	c.parseTemplates()
	return c
}

// SetAPI gives the console the admin API's full handler (middleware
// included), which it calls for every page and action. The server is
// built from the routes, the console among them, so the handler comes
// after the routes.
func (c *Console) SetAPI(h http.Handler) {
	c.mu.Lock()
	c.api = h
	c.mu.Unlock()
}

func (c *Console) apiHandler() http.Handler {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.api
}

// Routes adds the console's routes to the admin socket's mux.
func (c *Console) Routes(mux *http.ServeMux) {
	static, _ := fs.Sub(staticFS, "static")
	files := http.StripPrefix("/ui/static/", http.FileServerFS(static))
	mux.Handle("GET /ui/static/", c.secure(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	}))
	mux.Handle("GET /ui", http.RedirectHandler("/ui/", http.StatusSeeOther))
	mux.Handle("GET /ui/{$}", c.secure(c.overview))
	mux.Handle("GET /ui/", c.secure(func(w http.ResponseWriter, r *http.Request) {
		c.refuse(w, r, http.StatusNotFound, "SYS_CONSOLE_NOT_FOUND", "the console has no page "+r.URL.Path)
	}))
	mux.Handle("GET /ui/progress", c.secure(c.progress))
	c.dlqRoutes(mux)
	c.tenantRoutes(mux)
	c.erasureActionRoutes(mux)
	c.retentionRoutes(mux)
}

// secure sets the headers every console answer carries: nothing but the
// console's own files may run or load, no framing, no caching of pages that
// hold a CSRF token.
func (c *Console) secure(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w.Header())
		h(w, r)
	})
}

// securityHeaders are the daemon's pages' and the proxy's loader's: the
// loader's document becomes the page (session.js writes it), so it must
// allow no more than the page would.
func securityHeaders(hd http.Header) {
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: with no-referrer a form POST carries
	// "Origin: null", which the proxy (rightly) refuses.
	hd.Set("Referrer-Policy", "same-origin")
	if hd.Get("Cache-Control") == "" {
		hd.Set("Cache-Control", "no-store")
	}
}
