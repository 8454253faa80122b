package adminapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lifecycled/lifecycled/daemon/internal/idempotency"
)

// IdempotencyOptions configure Idempotency-Key handling.
type IdempotencyOptions struct {
	Store idempotency.Store
	// Settings are read per request, so a reload applies at once.
	TTL            func() time.Duration
	MismatchStatus func() int // 409 (source design) or 422 (IETF draft)
	LockTimeout    func() time.Duration
	// CanonicalURI, when set, returns the request target the fingerprint
	// covers, so that two spellings of one request are one request (see
	// CanonicalTenantURI); by default the request URI as sent.
	CanonicalURI func(r *http.Request) string
}

type idempotencyMiddleware struct {
	opts    IdempotencyOptions
	results *prometheus.CounterVec
	now     func() time.Time
}

func newIdempotencyMiddleware(o IdempotencyOptions, reg prometheus.Registerer) *idempotencyMiddleware {
	m := &idempotencyMiddleware{opts: o, now: time.Now, results: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lifecycled_idempotency_requests_total",
		Help: "Requests with an Idempotency-Key by result: new, replayed, mismatch, in_flight, invalid.",
	}, []string{"result"})}
	for _, r := range []string{"new", "replayed", "mismatch", "in_flight", "invalid"} {
		m.results.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.results)
	}
	return m
}

// bufferedResponse captures a handler's answer so it can be stored before
// it is sent.
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

// wrap applies Idempotency-Key to every POST route of mux. The first request
// with a key reserves it before the work and stores the answer after it; a
// replay within the TTL gets the stored answer without running the work; the
// same key with another request is a mismatch; a replay while the first is
// still running is refused. Keys are scoped by the caller's uid.
func (m *idempotencyMiddleware) wrap(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		values, present := r.Header[http.CanonicalHeaderKey(idempotency.Header)]
		if r.Method != http.MethodPost || !present {
			mux.ServeHTTP(w, r)
			return
		}
		_, pattern := mux.Handler(r)
		if pattern == "" || pattern == "/" {
			mux.ServeHTTP(w, r) // no such route: let the mux answer 404
			return
		}
		key := ""
		if len(values) == 1 {
			key = values[0]
		}
		if err := idempotency.ValidateKey(key); err != nil || len(values) != 1 {
			m.results.WithLabelValues("invalid").Inc()
			msg := "Idempotency-Key given more than once"
			if err != nil {
				msg = err.Error()
			}
			writeError(w, r, ScopeNone, &apiError{status: http.StatusBadRequest, code: "SYS_IDEMPOTENCY_VALIDATION_ERROR", message: msg,
				details: []any{FieldProblem{Field: idempotency.Header, Problem: msg}}})
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				writeError(w, r, scopeOf(r.URL.Path), &apiError{status: http.StatusRequestEntityTooLarge, kind: "VALIDATION_ERROR", message: "request body too large"})
				return
			}
			writeError(w, r, scopeOf(r.URL.Path), invalid("read request body: %v", err))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		uid := Peer(r.Context()).UID
		target := r.URL.RequestURI()
		if m.opts.CanonicalURI != nil {
			target = m.opts.CanonicalURI(r)
		}
		hash := idempotency.Fingerprint(r.Method, target, body)
		now := m.now()
		rec := idempotency.Record{CallerUID: uid, Key: key, Route: pattern, RequestHash: hash, ExpiresAt: now.Add(m.opts.TTL())}
		holder, err := m.opts.Store.ReserveIdempotencyKey(r.Context(), rec, now, now.Add(-m.opts.LockTimeout()))
		if err != nil {
			writeError(w, r, scopeOf(r.URL.Path), err)
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
		} else if err := m.opts.Store.CompleteIdempotencyKey(sctx, uid, key, hash, buf.status, buf.body.Bytes(), m.now().Add(m.opts.TTL())); err != nil {
			if l := loggerFrom(r); l != nil {
				l.Error("store idempotent response", "key", key, "error", err)
			}
		}
		for k, v := range buf.header {
			w.Header()[k] = v
		}
		w.WriteHeader(buf.status)
		_, _ = w.Write(buf.body.Bytes())
	})
}

func (m *idempotencyMiddleware) answerHeld(w http.ResponseWriter, r *http.Request, holder *idempotency.Record, hash string) {
	switch {
	case holder.RequestHash != hash:
		m.results.WithLabelValues("mismatch").Inc()
		status := m.opts.MismatchStatus()
		writeError(w, r, ScopeNone, &apiError{status: status, code: "SYS_IDEMPOTENCY_KEY_MISMATCH",
			message: "this Idempotency-Key was used for a different request (method, path or body differ); use a new key"})
	case holder.State != idempotency.StateDone:
		m.results.WithLabelValues("in_flight").Inc()
		w.Header().Set("Retry-After", "1")
		writeError(w, r, ScopeNone, &apiError{status: http.StatusConflict, code: "SYS_IDEMPOTENCY_IN_FLIGHT",
			message: "a request with this Idempotency-Key is still being processed; retry later"})
	default:
		m.results.WithLabelValues("replayed").Inc()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set(idempotency.ReplayedHeader, "true")
		w.WriteHeader(holder.ResponseStatus)
		_, _ = w.Write(holder.ResponseBody)
	}
}
