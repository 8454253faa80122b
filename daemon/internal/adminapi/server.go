// Package adminapi serves lifecycled's admin HTTP API on a Unix socket (and
// /metrics, /healthz, /readyz on an optional loopback TCP listener): the
// routes of DESIGN.md, the error envelope, the socket's hygiene and access
// control from peer credentials, the audit log of every mutating request,
// and Idempotency-Key on the POST routes.
package adminapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sys/unix"

	"github.com/lifecycled/lifecycled/daemon/internal/idempotency"
)

// Check is one readiness check.
type Check struct {
	Name string
	Fn   func(ctx context.Context) error
}

// Options configures a Server.
type Options struct {
	Logger        hclog.Logger
	Socket        SocketOptions
	MetricsListen string // "" for none
	// Pprof serves /debug/pprof on the socket to callers with full access.
	Pprof    bool
	Policy   func() AccessPolicy
	Registry *prometheus.Registry
	Gatherer prometheus.Gatherer
	// Checks returns the readiness checks; it is called per request so that
	// plugins added by a reload are included.
	Checks func() []Check
	// ProbeStores probes every plugin's store now: /readyz?probe calls it
	// before the checks.
	ProbeStores func(ctx context.Context)
	// Routes adds the API routes to the socket's mux.
	Routes []func(mux *http.ServeMux)
	// Idempotency enables Idempotency-Key on POST routes; nil disables it.
	Idempotency *IdempotencyOptions
}

// Server is the admin API.
type Server struct {
	opts     Options
	log      hclog.Logger
	mw       *middleware
	idem     *idempotency.Middleware
	unix     *http.Server
	tcp      *http.Server
	unixL    *net.UnixListener
	tcpL     net.Listener
	inode    uint64
	draining atomic.Bool
	wg       sync.WaitGroup
	stopOnce sync.Once
}

// New builds the server; Start listens.
func New(o Options) *Server {
	s := &Server{opts: o, log: o.Logger.Named("adminapi")}
	s.mw = &middleware{
		log:    s.log,
		policy: o.Policy,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifecycled_admin_requests_total",
			Help: "Admin API requests by route pattern and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lifecycled_admin_request_duration_seconds",
			Help:    "Admin API request latency by route pattern.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route"}),
	}
	if o.Registry != nil {
		o.Registry.MustRegister(s.mw.requests, s.mw.latency)
	}
	if o.Idempotency != nil {
		var reg prometheus.Registerer
		if o.Registry != nil {
			reg = o.Registry
		}
		s.idem = newIdempotencyMiddleware(*o.Idempotency, reg)
	}
	return s
}

// commonRoutes are the routes of both listeners: health, readiness and
// metrics. detailed says whether /readyz may show a failing check's error:
// on the admin socket, not on the metrics port, which asks for no credentials
// and would hand out the stores' hosts, users and database names.
func (s *Server) commonRoutes(mux *http.ServeMux, detailed bool) {
	mux.HandleFunc("GET /healthz", s.handleHealthz)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) { s.handleReadyz(w, r, detailed) })
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.opts.Gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if allow := allowedMethods(mux, r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, r, scopeOf(r.URL.Path), &apiError{status: http.StatusMethodNotAllowed, kind: "METHOD_NOT_ALLOWED",
				message: fmt.Sprintf("%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, strings.Join(allow, ", "))})
			return
		}
		writeError(w, r, scopeOf(r.URL.Path), notFound("no route for %s %s", r.Method, r.URL.Path))
	})
}

// allowedMethods lists the methods that have a route for r's path. This
// catch-all route would otherwise hide ServeMux's own 405.
func allowedMethods(mux *http.ServeMux, r *http.Request) []string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	return allow
}

// routeOf is the route pattern that serves r, for metrics labels: also for
// requests answered before routing (403, an idempotent replay), which
// r.Pattern does not name.
func routeOf(mux *http.ServeMux, r *http.Request) string {
	if r.Pattern != "" && r.Pattern != "/" {
		return r.Pattern
	}
	if _, pattern := mux.Handler(r); pattern != "" && pattern != "/" {
		return pattern
	}
	return "unmatched"
}

// Handler returns the socket's full handler (for tests over httptest too).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	s.commonRoutes(mux, true)
	if s.opts.Pprof {
		for path, h := range map[string]http.HandlerFunc{"/debug/pprof/": pprof.Index, "/debug/pprof/cmdline": pprof.Cmdline,
			"/debug/pprof/profile": pprof.Profile, "/debug/pprof/symbol": pprof.Symbol, "/debug/pprof/trace": pprof.Trace} {
			mux.HandleFunc("GET "+path, s.adminsOnly(h))
		}
	}
	for _, add := range s.opts.Routes {
		add(mux)
	}
	if s.idem != nil {
		return s.mw.wrap(s.idem.Wrap(mux), mux, true)
	}
	return s.mw.wrap(mux, mux, true)
}

// metricsHandler serves only /metrics, /healthz and /readyz.
func (s *Server) metricsHandler() http.Handler {
	mux := http.NewServeMux()
	s.commonRoutes(mux, false)
	return s.mw.wrap(mux, mux, false)
}

// Start listens on the socket (and the metrics port) and serves in the
// background. It returns once the listeners are open.
func (s *Server) Start(context.Context) error {
	l, err := listenUnix(s.opts.Socket)
	if err != nil {
		return err
	}
	s.unixL = l
	s.inode = inodeOf(s.opts.Socket.Path)
	adminConns, metricsConns := connLimits()
	// No WriteTimeout on the socket: `tenant delete --wait` and the console
	// stream progress for as long as a job runs.
	s.unix = &http.Server{
		Handler:           s.Handler(),
		ConnContext:       connContext,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       time.Minute,
		ErrorLog:          s.log.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	if s.opts.MetricsListen != "" {
		tl, err := net.Listen("tcp", s.opts.MetricsListen)
		if err != nil {
			s.unixL.Close()
			removeSocket(s.opts.Socket.Path, s.inode)
			return fmt.Errorf("listen on metrics_listen %s: %w", s.opts.MetricsListen, err)
		}
		s.tcpL = tl
		s.tcp = &http.Server{Handler: s.metricsHandler(), ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 30 * time.Second,
			ErrorLog: s.log.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})}
	}
	s.serve(s.unix, newLimitListener(s.unixL, adminConns))
	if s.tcp != nil {
		s.serve(s.tcp, newLimitListener(s.tcpL, metricsConns))
	}
	s.log.Info("admin API listening", "socket", s.opts.Socket.Path, "metrics_listen", s.opts.MetricsListen,
		"max_connections", adminConns, "metrics_max_connections", metricsConns)
	return nil
}

func (s *Server) serve(srv *http.Server, l net.Listener) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("admin API stopped serving", "error", err)
		}
	}()
}

// connLimits bounds how many connections each listener holds at once, from
// the process's file limit: idle clients of the metrics port (any local
// user can open them) must never use up the descriptors that the admin
// socket, the state store and the plugins need. Connections beyond the
// limit wait in the kernel's backlog until one closes.
func connLimits() (admin, metrics int) {
	nofile := uint64(1024)
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err == nil && rl.Cur > 0 && rl.Cur != unix.RLIM_INFINITY {
		nofile = rl.Cur
	}
	clamp := func(v, lo, hi uint64) int { return int(max(lo, min(v, hi))) }
	return clamp(nofile/4, 4, 128), clamp(nofile/8, 2, 32)
}

// Drain makes /readyz answer 503 so that nothing new is routed here.
func (s *Server) Drain() { s.draining.Store(true) }

// Stop drains in-flight requests until ctx ends, then closes the listeners
// and removes the socket. It is safe to call twice.
func (s *Server) Stop(ctx context.Context) error {
	var err error
	s.stopOnce.Do(func() {
		s.Drain()
		for _, srv := range []*http.Server{s.unix, s.tcp} {
			if srv == nil {
				continue
			}
			if e := srv.Shutdown(ctx); e != nil {
				err = errors.Join(err, e)
				_ = srv.Close()
			}
		}
		s.wg.Wait()
		if s.unixL != nil {
			removeSocket(s.opts.Socket.Path, s.inode)
		}
	})
	return err
}

// Draining reports whether Drain was called.
func (s *Server) Draining() bool { return s.draining.Load() }

// adminsOnly serves h to callers with full access: a read-only caller may
// GET the API, not the daemon's profiles (its command line, goroutines and
// heap, and CPU profiles as long as asked for).
func (s *Server) adminsOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Policy != nil {
			if ok, why := s.opts.Policy().allows(Peer(r.Context()), http.MethodPost); !ok {
				writeError(w, r, scopeOf(r.URL.Path), &apiError{status: http.StatusForbidden, kind: "FORBIDDEN",
					message: why + "; /debug/pprof is for callers with full access"})
				return
			}
		}
		h(w, r)
	}
}
