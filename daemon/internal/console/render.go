package console

import (
	"bytes"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lifecycled/lifecycled/daemon/wire"
)

// CSRFHeader carries the session's CSRF token from `lifecycled ui` to the
// daemon, which puts it in every form and checks it on every mutation. The
// proxy sets it from its session and drops any a browser sent.
const CSRFHeader = "X-Lifecycled-Console-Csrf"

// formTokens go into every form: the session's CSRF token, and a key made
// for this page so that a form sent twice (a double click, a reload of the
// answer) is one change: the console sends it as the Idempotency-Key of
// the API call the form makes.
type formTokens struct {
	CSRF string
	Once string
}

// String is the CSRF token (htmx's header on the page's body).
func (f formTokens) String() string { return f.CSRF }

// page is what every template gets.
type page struct {
	Title     string
	Nav       string
	CSRF      formTokens
	CanMutate bool
	RequestID string
	Errors    []*APIError
	Notice    string
	// Alerts are what every page shows in a red banner: plugins that are
	// not running, and stores their last probe found down.
	Alerts []string
	Data   any
	// Self is the page's own address without its one-time notice: what
	// its live regions fetch again to refresh themselves.
	Self string
}

func (c *Console) parseTemplates() {
	layout := template.Must(template.New("layout").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/parts.html"))
	names, err := templateFS.ReadDir("templates")
	if err != nil {
		panic(err)
	}
	for _, e := range names {
		n := e.Name()
		if n == "layout.html" || n == "parts.html" {
			continue
		}
		c.pages[strings.TrimSuffix(n, ".html")] = template.Must(template.Must(layout.Clone()).ParseFS(templateFS, "templates/"+n))
	}
}

// newPage starts the data of a page for r.
func (c *Console) newPage(w http.ResponseWriter, r *http.Request, title, nav string) *page {
	once, _ := randomToken()
	p := &page{Title: title, Nav: nav, CSRF: formTokens{CSRF: r.Header.Get(CSRFHeader), Once: once}, CanMutate: c.opts.MayMutate == nil || c.opts.MayMutate(r),
		RequestID: w.Header().Get("X-Request-Id"), Notice: notices[r.URL.Query().Get("done")]}
	p.Alerts = c.alerts(w, r)
	if r.Method == http.MethodGet {
		self := *r.URL
		q := self.Query()
		q.Del("done")
		self.RawQuery = q.Encode()
		p.Self = self.RequestURI()
	}
	return p
}

// alerts are the plugins that are not running and the stores found down,
// from the plugin list (held in memory: no store is read for it).
func (c *Console) alerts(w http.ResponseWriter, r *http.Request) []string {
	api, ctx := c.client(w, r)
	ps, err := api.Plugins(ctx)
	if err != nil {
		return nil // the page's own calls say what is wrong with the API
	}
	var out []string
	for _, p := range ps.Plugins {
		switch {
		case p.State != "running":
			why := p.LastError
			if why == "" {
				why = "no error recorded"
			}
			out = append(out, fmt.Sprintf("Plugin %s is %s: %s", p.Name, p.State, why))
		case p.Store.State == "down" && p.Store.Since != nil:
			out = append(out, fmt.Sprintf("The store of %s is down since %s: %s", p.Name, *p.Store.Since, p.Store.Error))
		}
	}
	return out
}

// addErr records a failed API call for the page's error box; other errors
// (a body the console cannot read) are shown the same way.
func (p *page) addErr(err error) {
	if err == nil {
		return
	}
	ae, ok := apiErrorOf(err)
	if !ok {
		ae = &APIError{Status: http.StatusInternalServerError, Code: "SYS_CONSOLE_ERROR", Message: err.Error()}
	}
	p.Errors = append(p.Errors, ae)
}

// render writes a whole page, or with name "frag:PAGE:NAME" the template
// NAME of PAGE alone, on the page's data (the fragments htmx polls).
func (c *Console) render(w http.ResponseWriter, status int, name string, p *page) {
	tmplName, exec, data := name, "layout", any(p)
	if frag, ok := strings.CutPrefix(name, "frag:"); ok {
		// A fragment gets the page's data alone.
		tmplName, exec, data = strings.SplitN(frag, ":", 2)[0], strings.SplitN(frag, ":", 2)[1], p.Data
	}
	t, ok := c.pages[tmplName]
	if !ok {
		http.Error(w, "no template "+tmplName, http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, exec, data); err != nil {
		c.log.Error("render", "page", name, "error", err)
		http.Error(w, "the console could not render this page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// notices are the fixed messages a redirect after an action may show
// (?done=...): fixed, so a crafted link cannot put words on the page.
var notices = map[string]string{
	"retried":     "The message was republished.",
	"revived":     "The message was given another chance (PENDING).",
	"deleted":     "The message was deleted.",
	"paused":      "Automatic retries of the topic are paused.",
	"resumed":     "Automatic retries of the topic are resumed.",
	"started":     "The erasure was started.",
	"cancel":      "Cancel requested.",
	"retried-now": "The erasure runs again now: its failed and blocked deleters are due at once.",
	"approved":    "The plan was approved: the erasure is queued, held to that plan.",
	"held":        "The tenant is on legal hold: its erasure waits, and a new one is refused.",
	"released":    "The hold was released: a waiting erasure is due at once.",
	"replayed":    "The message was replayed; the stored original is unchanged.",
}

// mutation guards a POST handler of the console: the caller must be
// allowed to mutate (the API's middleware has already refused read-only
// callers; this is the same check for a console wired without it) and the
// form must carry the session's CSRF token.
func (c *Console) mutation(h http.HandlerFunc) http.Handler {
	return c.secure(func(w http.ResponseWriter, r *http.Request) {
		if c.opts.MayMutate != nil && !c.opts.MayMutate(r) {
			c.refuse(w, r, http.StatusForbidden, "SYS_CONSOLE_FORBIDDEN", "your uid has read-only access: the console does not change anything for it")
			return
		}
		// A form the server cannot read (more fields than Go reads, 10,000:
		// a selection too large for a form) is refused as such, rather
		// than as a form without its token or its action.
		if err := r.ParseForm(); err != nil {
			c.refuse(w, r, http.StatusBadRequest, "SYS_CONSOLE_VALIDATION_ERROR",
				"the form could not be read ("+err.Error()+"); nothing was changed. To act on more than a few thousand messages, use a filter rather than a selection")
			return
		}
		want := r.Header.Get(CSRFHeader)
		got := r.Header.Get("X-CSRF-Token")
		if got == "" {
			got = r.PostFormValue("csrf")
		}
		if want == "" || subtle.ConstantTimeCompare([]byte(want), []byte(got)) != 1 {
			c.refuse(w, r, http.StatusForbidden, "SYS_CONSOLE_CSRF", "the request does not carry the session's CSRF token: reload the page, or open the console with `lifecycled ui`")
			return
		}
		h(w, r)
	})
}

func (c *Console) refuse(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	p := c.newPage(w, r, "Refused", "")
	p.Errors = append(p.Errors, &APIError{Status: status, Code: code, Message: msg, RequestID: p.RequestID})
	c.render(w, status, "error", p)
}

var funcs = template.FuncMap{
	"sparkline": sparkline,
	"ago":       ago,
	"pretty":    prettyJSON,
	"join":      strings.Join,
	"count":     func(m map[string]int64, k string) int64 { return m[k] },
	"keys":      sortedKeys,
	"withParam": withParam,
	// pathseg puts a name in a path as one segment: a topic may hold "/"
	// (a RabbitMQ queue), which html/template leaves as it is in a path.
	"pathseg": url.PathEscape,
	"deref": func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	},
	"pct": func(done, total int64) int64 {
		if total <= 0 {
			return 0
		}
		return min(100, done*100/total)
	},
}

// ago is "3m ago" for an RFC 3339 time, or the text as it is.
func ago(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	d := time.Since(t).Round(time.Second)
	switch {
	case d < 0:
		return "in " + (-d).String()
	case d < time.Minute:
		return d.String() + " ago"
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm ago", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd ago", int(d.Hours()/24))
	}
}

func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

// sortedKeys lists the keys of any map with string keys, in order, for
// templates (which range over maps in key order but cannot index a map of
// maps by a sorted key list otherwise).
func sortedKeys(m any) []string {
	v := reflect.ValueOf(m)
	if v.Kind() != reflect.Map {
		return nil
	}
	out := make([]string, 0, v.Len())
	for _, k := range v.MapKeys() {
		out = append(out, k.String())
	}
	sort.Strings(out)
	return out
}

// withParam is the URL u with one query parameter set (or removed when v
// is empty): pagination and filter links keep every other filter.
func withParam(u *url.URL, k, v string) string {
	q := u.Query()
	if v == "" {
		q.Del(k)
	} else {
		q.Set(k, v)
	}
	out := *u
	out.RawQuery = q.Encode()
	return out.RequestURI()
}

// payloadView is how a payload is shown: pretty JSON, text, or a hex dump
// for bytes that are not text; "null" for a null value (a tombstone),
// "empty" when nothing was kept.
type payloadView struct {
	Kind string // "json", "text", "binary", "null", "empty"
	Text string
}

func viewPayload(raw json.RawMessage, b64 wire.Base64Field, decode func(string) ([]byte, error)) payloadView {
	if b64.Null() {
		return payloadView{Kind: "null"}
	}
	if b64.Value == nil {
		if len(raw) == 0 || string(raw) == "null" {
			return payloadView{Kind: "empty"}
		}
		return payloadView{Kind: "json", Text: prettyJSON(raw)}
	}
	b, err := decode(*b64.Value)
	if err != nil {
		return payloadView{Kind: "binary", Text: *b64.Value}
	}
	if utf8.Valid(b) && !bytes.ContainsAny(b, "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x0b\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f") {
		return payloadView{Kind: "text", Text: string(b)}
	}
	return payloadView{Kind: "binary", Text: hex.Dump(b)}
}
