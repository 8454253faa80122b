package adminapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
)

// MaxBodyBytes caps request bodies.
const MaxBodyBytes = 1 << 20

type ctxKey int

const (
	requestIDKey ctxKey = iota
	loggerKey
)

var clientRequestIDRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

func newRequestID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "req_" + hex.EncodeToString(b)
}

func requestID(r *http.Request) string {
	id, _ := r.Context().Value(requestIDKey).(string)
	return id
}

func loggerFrom(r *http.Request) hclog.Logger {
	l, _ := r.Context().Value(loggerKey).(hclog.Logger)
	return l
}

// statusRecorder remembers the status code a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.bytes += n
	return n, err
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// AccessPolicy decides who may call the admin API, from config.
type AccessPolicy struct {
	AllowUIDs, AllowGIDs       []int
	ReadOnlyUIDs, ReadOnlyGIDs []int
}

// allows reports whether peer may make a request with method.
func (p AccessPolicy) allows(peer PeerCred, method string) (bool, string) {
	if !peer.Known {
		return true, "" // the TCP metrics listener serves read-only routes only
	}
	uid, gid := int(peer.UID), int(peer.GID)
	readOnly := slices.Contains(p.ReadOnlyUIDs, uid) || slices.Contains(p.ReadOnlyGIDs, gid)
	full := slices.Contains(p.AllowUIDs, uid) || slices.Contains(p.AllowGIDs, gid)
	restricted := len(p.AllowUIDs)+len(p.AllowGIDs)+len(p.ReadOnlyUIDs)+len(p.ReadOnlyGIDs) > 0
	switch {
	case !restricted || full:
		return true, ""
	case readOnly && (method == http.MethodGet || method == http.MethodHead):
		return true, ""
	case readOnly:
		return false, fmt.Sprintf("uid %d has read-only access to the admin API", uid)
	default:
		return false, fmt.Sprintf("uid %d (gid %d) is not in admin.allow_uids or admin.allow_gids", uid, gid)
	}
}

func isMutating(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}

type middleware struct {
	log      hclog.Logger
	policy   func() AccessPolicy
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// wrap applies, outermost first: request id, panic recovery, metrics and
// audit, Host/Origin checks, access policy, path sanity and the body cap.
func (m *middleware) wrap(next http.Handler, mux *http.ServeMux, localOnly bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get("X-Request-Id")
		if !clientRequestIDRE.MatchString(id) {
			id = newRequestID()
		}
		ctx := context.WithValue(r.Context(), requestIDKey, id)
		ctx = context.WithValue(ctx, loggerKey, m.log)
		r = r.WithContext(ctx)
		w.Header().Set("X-Request-Id", id)
		rec := &statusRecorder{ResponseWriter: w}

		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				m.log.Error("handler panicked", "path", r.URL.Path, "request_id", id, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				if rec.status == 0 {
					writeError(rec, r, scopeOf(r.URL.Path), fmt.Errorf("panic: %v", p))
				}
			}
			route := routeOf(mux, r)
			code := strconv.Itoa(rec.status)
			m.requests.WithLabelValues(route, code).Inc()
			m.latency.WithLabelValues(route).Observe(time.Since(start).Seconds())
			if isMutating(r.Method) {
				peer := Peer(r.Context())
				via := "api"
				if viaConsole(r) {
					via = "console"
				}
				m.log.Info("audit", "method", r.Method, "path", r.URL.Path, "status", rec.status,
					"uid", peer.UID, "gid", peer.GID, "pid", peer.PID, "request_id", id,
					"idempotency_key", r.Header.Get("Idempotency-Key"), "via", via, "took", time.Since(start).String())
			}
		}()

		if !validHost(r.Host) {
			writeError(rec, r, scopeOf(r.URL.Path), invalid("Host must be localhost (or empty) on the admin socket; got %q", r.Host))
			return
		}
		if r.Header.Get("Origin") != "" {
			writeError(rec, r, scopeOf(r.URL.Path), &apiError{status: http.StatusForbidden, kind: "FORBIDDEN",
				message: "requests with an Origin header are refused: the admin API is not for browsers"})
			return
		}
		// Health and metrics say nothing secret and are also served on the
		// TCP listener without credentials; the policy guards the API.
		if localOnly && !isHealthPath(r.URL.Path) {
			if ok, why := m.policy().allows(Peer(r.Context()), r.Method); !ok {
				writeError(rec, r, scopeOf(r.URL.Path), &apiError{status: http.StatusForbidden, kind: "FORBIDDEN", message: why})
				return
			}
		}
		if hasDotSegment(r.URL.Path) {
			// ServeMux would answer a redirect to the cleaned path; a path
			// parameter like "..' is bad input, not a different route.
			writeError(rec, r, scopeOf(r.URL.Path), invalid("path must not contain empty, '.' or '..' segments"))
			return
		}
		// url.URL.Query drops what it cannot parse (a pair with a ';', a
		// bad %-escape, everything past 10,000 pairs) without a word:
		// `?dry_run=true;` would read as no dry run at all.
		if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
			writeError(rec, r, scopeOf(r.URL.Path), invalid("the query string cannot be read (%v); nothing was done", err))
			return
		}
		// A body is read as sent: an encoded one would be read as text.
		if enc := r.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
			writeError(rec, r, scopeOf(r.URL.Path), invalid("Content-Encoding %q is not taken: send the body as is", enc))
			return
		}
		limit := int64(MaxBodyBytes)
		if r.URL.Path == ledgerPath {
			limit = MaxLedgerBytes // the whole ledger
		}
		if r.ContentLength > limit {
			writeError(rec, r, scopeOf(r.URL.Path), &apiError{status: http.StatusRequestEntityTooLarge, kind: "VALIDATION_ERROR",
				message: fmt.Sprintf("request body larger than %d bytes", limit)})
			return
		}
		r.Body = http.MaxBytesReader(rec, r.Body, limit)
		next.ServeHTTP(rec, r)
	})
}

func isHealthPath(p string) bool {
	return p == "/healthz" || p == "/readyz" || p == "/metrics"
}

func validHost(host string) bool {
	if host == "" {
		return true
	}
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	h = strings.Trim(h, "[]")
	return h == "localhost" || h == "127.0.0.1" || h == "::1"
}

// hasDotSegment reports "." or ".." segments, and empty ones ("//"), all
// of which ServeMux would answer with a redirect to a cleaned path.
func hasDotSegment(p string) bool {
	segs := strings.Split(p, "/")
	for i, seg := range segs {
		if seg == "." || seg == ".." || (seg == "" && i > 0 && i < len(segs)-1) {
			return true
		}
	}
	return false
}
