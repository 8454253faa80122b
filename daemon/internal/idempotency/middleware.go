package idempotency

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Options configure the middleware.
type Options struct {
	Store Store
	// Settings are read per request, so that a reload applies at once.
	TTL            func() time.Duration
	MismatchStatus func() int // 409 (source design) or 422 (IETF draft)
	LockTimeout    func() time.Duration
	// CanonicalURI, when set, returns the request target the fingerprint
	// covers, so that two spellings of one request are one request; by
	// default the request URI as sent.
	CanonicalURI func(r *http.Request) string
	// CallerUID scopes keys: one caller's key never replays another's.
	CallerUID func(r *http.Request) uint32
	// Fail writes an error answer in the API's envelope.
	Fail func(w http.ResponseWriter, r *http.Request, f Failure)
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
	// Registerer receives the requests counter; nil for none.
	Registerer prometheus.Registerer
}

// Failure is an error the middleware answers itself: a status, code and
// message of its own, or Err (a store error) for the API to classify.
type Failure struct {
	Status  int
	Code    string // SYS_IDEMPOTENCY_*, or "" for the route's own scope
	Message string
	// Field names the offending header for a validation error.
	Field string
	Err   error
	// LogOnly: the answer is already decided; only log Err (w is nil).
	LogOnly bool
}

// Middleware applies Idempotency-Key to the POST routes of a mux.
type Middleware struct {
	opts    Options
	results *prometheus.CounterVec
}

// replayedHeaders are the response headers stored with an answer and given
// back on a replay: a 202's Location says where the job is.
var replayedHeaders = []string{"Location", "Content-Location", "Content-Type", "Retry-After", "Link"}

// NewMiddleware returns the middleware; the requests counter starts every
// result at 0.
func NewMiddleware(o Options) *Middleware {
	if o.Now == nil {
		o.Now = time.Now
	}
	m := &Middleware{opts: o, results: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lifecycled_idempotency_requests_total",
		Help: "Requests with an Idempotency-Key by result: new, replayed, mismatch, in_flight, invalid.",
	}, []string{"result"})}
	for _, r := range []string{"new", "replayed", "mismatch", "in_flight", "invalid"} {
		m.results.WithLabelValues(r)
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(m.results)
	}
	return m
}

// bufferedResponse captures a handler's answer so that it can be stored
// before it is sent.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }
func (b *bufferedResponse) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}
func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

// Wrap applies Idempotency-Key to every POST route of mux. The first request
// with a key reserves it before the work and stores the answer (status,
// body and the headers that matter) after it; a replay within the TTL gets
// the stored answer without running the work; the same key with another
// request is a mismatch; a replay while the first is still running is
// refused. Keys are scoped by the caller's uid.
func (m *Middleware) Wrap(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		values, present := r.Header[http.CanonicalHeaderKey(Header)]
		if r.Method != http.MethodPost || !present {
			mux.ServeHTTP(w, r)
			return
		}
		_, pattern := mux.Handler(r)
		if pattern == "" || pattern == "/" {
			mux.ServeHTTP(w, r) // no such route: let the mux answer
			return
		}
		key := ""
		if len(values) == 1 {
			key = values[0]
		}
		if err := ValidateKey(key); err != nil || len(values) != 1 {
			m.results.WithLabelValues("invalid").Inc()
			msg := Header + " given more than once"
			if err != nil {
				msg = err.Error()
			}
			m.opts.Fail(w, r, Failure{Status: http.StatusBadRequest, Code: "SYS_IDEMPOTENCY_VALIDATION_ERROR", Message: msg, Field: Header})
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				m.opts.Fail(w, r, Failure{Status: http.StatusRequestEntityTooLarge, Message: "request body too large"})
				return
			}
			m.opts.Fail(w, r, Failure{Status: http.StatusBadRequest, Message: "read request body: " + err.Error()})
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		uid := m.opts.CallerUID(r)
		target := r.URL.RequestURI()
		if m.opts.CanonicalURI != nil {
			target = m.opts.CanonicalURI(r)
		}
		hash := Fingerprint(r.Method, target, body)
		now := m.opts.Now()
		rec := Record{CallerUID: uid, Key: key, Route: pattern, RequestHash: hash, ExpiresAt: now.Add(m.opts.TTL())}
		holder, err := m.opts.Store.ReserveIdempotencyKey(r.Context(), rec, now, now.Add(-m.opts.LockTimeout()))
		if err != nil {
			m.opts.Fail(w, r, Failure{Err: err})
			return
		}
		if holder != nil {
			m.answerHeld(w, r, holder, hash)
			return
		}
		m.results.WithLabelValues("new").Inc()
		buf := &bufferedResponse{header: http.Header{}}
		completed := false
		defer func() {
			if !completed {
				// The handler panicked: forget the reservation so a retry runs.
				_ = m.opts.Store.ReleaseIdempotencyKey(context.WithoutCancel(r.Context()), uid, key, hash)
			}
		}()
		mux.ServeHTTP(buf, r)
		completed = true
		if buf.status == 0 {
			buf.status = http.StatusOK
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
		defer cancel()
		if buf.status >= 500 {
			// The work did not complete; a retry with the same key may run it.
			_ = m.opts.Store.ReleaseIdempotencyKey(sctx, uid, key, hash)
		} else {
			kept := http.Header{}
			for _, h := range replayedHeaders {
				if v := buf.header.Values(h); len(v) > 0 {
					kept[h] = v
				}
			}
			resp := Response{Status: buf.status, Headers: kept, Body: buf.body.Bytes()}
			if err := m.opts.Store.CompleteIdempotencyKey(sctx, uid, key, hash, resp, m.opts.Now().Add(m.opts.TTL())); err != nil {
				m.opts.Fail(nil, r, Failure{Err: err, LogOnly: true})
			}
		}
		for k, v := range buf.header {
			w.Header()[k] = v
		}
		w.WriteHeader(buf.status)
		_, _ = w.Write(buf.body.Bytes())
	})
}

func (m *Middleware) answerHeld(w http.ResponseWriter, r *http.Request, holder *Record, hash string) {
	switch {
	case holder.RequestHash != hash:
		m.results.WithLabelValues("mismatch").Inc()
		m.opts.Fail(w, r, Failure{Status: m.opts.MismatchStatus(), Code: "SYS_IDEMPOTENCY_KEY_MISMATCH",
			Message: "this Idempotency-Key was used for a different request (method, path or body differ); use a new key"})
	case holder.State != StateDone:
		m.results.WithLabelValues("in_flight").Inc()
		w.Header().Set("Retry-After", "1")
		m.opts.Fail(w, r, Failure{Status: http.StatusConflict, Code: "SYS_IDEMPOTENCY_IN_FLIGHT",
			Message: "a request with this Idempotency-Key is still being processed; retry later"})
	default:
		m.results.WithLabelValues("replayed").Inc()
		for k, v := range holder.Response.Headers {
			w.Header()[k] = v
		}
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.Header().Set(ReplayedHeader, "true")
		w.WriteHeader(holder.Response.Status)
		_, _ = w.Write(holder.Response.Body)
	}
}
