// Package app wires the daemon together with go.uber.org/fx and runs it
// under systemd's rules: READY=1 once config, state store, plugins and the
// admin socket are up; SIGHUP reloads the config (an invalid one is refused
// and the old one keeps running); SIGTERM and SIGINT drain within
// shutdown_timeout and exit 0. It is the only package that imports fx; every
// component it wires has a plain constructor and Start/Stop.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/dig"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"

	"github.com/lifecycled/lifecycled/daemon/internal/adminapi"
	"github.com/lifecycled/lifecycled/daemon/internal/buildinfo"
	"github.com/lifecycled/lifecycled/daemon/internal/config"
	"github.com/lifecycled/lifecycled/daemon/internal/console"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq/intake"
	"github.com/lifecycled/lifecycled/daemon/internal/logging"
	"github.com/lifecycled/lifecycled/daemon/internal/pluginhost"
	"github.com/lifecycled/lifecycled/daemon/internal/sdnotify"
	"github.com/lifecycled/lifecycled/daemon/internal/store"
	"github.com/lifecycled/lifecycled/migrations"
)

// ExitConfig is the exit status for an invalid config (EX_CONFIG); the unit
// file lists it in RestartPreventExitStatus so systemd does not loop.
const ExitConfig = 78

// ConfigError marks a failure the operator must fix in config.toml.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Options for Run.
type Options struct {
	ConfigPath string
	Stderr     io.Writer
	// Signals replaces the OS signals (tests); nil means os/signal.
	Signals chan os.Signal
}

// daemonID names this process in leases, so that several daemons sharing a
// PostgreSQL state store can tell their claims apart.
type daemonID string

// Run loads the config and runs the daemon until SIGTERM or SIGINT.
func Run(ctx context.Context, o Options) error {
	cfg, err := config.Load(o.ConfigPath)
	if err != nil {
		return &ConfigError{Err: err}
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	log := logging.New("lifecycled", cfg.Daemon.LogLevel, cfg.Daemon.LogFormat, o.Stderr)
	// Before anything starts: another instance on the socket means this one
	// must not start its plugins (a Kafka source would join the group).
	if path, err := cfg.SocketPath(); err == nil {
		if _, err := adminapi.CheckSocketPath(path); err != nil {
			return err
		}
	}
	holder := config.NewHolder(cfg)
	notifier := sdnotify.Notifier{}
	host, _ := os.Hostname()
	id := daemonID(fmt.Sprintf("%s/%d/%s", host, os.Getpid(), uuid.NewString()[:8]))

	var (
		admin   *adminapi.Server
		plugins *pluginhost.Host
		st      store.Store
		intake  *intake.Pipeline
		rl      *reloader
	)
	fxApp := fx.New(
		fx.WithLogger(func() fxevent.Logger { return fxLogger{l: log.Named("fx")} }),
		fx.StartTimeout(startTimeout(cfg)),
		fx.StopTimeout(cfg.Daemon.ShutdownTimeout.Duration+cfg.Plugins.ShutdownTimeout.Duration+5*time.Second),
		fx.Supply(holder, fx.Annotate(log, fx.As(new(hclog.Logger))), id),
		fx.Provide(
			newRegistry,
			newStore,
			newPluginHost,
			newAdminServer,
			func(reg prometheus.Registerer) *reloader {
				return newReloader(o.ConfigPath, holder, log.Named("reload"), notifier, reg)
			},
		),
		modules(),
		fx.Populate(&admin, &plugins, &st, &intake, &rl),
	)
	if err := fxApp.Err(); err != nil {
		return startupError(err)
	}
	startCtx, cancel := context.WithTimeout(ctx, startTimeout(cfg))
	err = fxApp.Start(startCtx)
	cancel()
	if err != nil {
		return startupError(err)
	}
	log.Info("lifecycled ready", "version", buildinfo.Version, "state", st.Dialect(), "plugins", len(cfg.Instances()), "daemon_id", string(id))
	_ = notifier.Ready(rl.status(plugins))

	sigs := o.Signals
	if sigs == nil {
		sigs = make(chan os.Signal, 4)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
		defer signal.Stop(sigs)
	}
	var watchdog <-chan time.Time
	if iv := sdnotify.WatchdogInterval(); iv > 0 {
		t := time.NewTicker(iv)
		defer t.Stop()
		watchdog = t.C
	}
	statusTick := time.NewTicker(30 * time.Second)
	defer statusTick.Stop()

loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-watchdog:
			_ = notifier.Watchdog()
		case <-statusTick.C:
			_ = notifier.Status(rl.status(plugins))
		case <-plugins.StoreChanges():
			_ = notifier.Status(rl.status(plugins))
		case reply := <-rl.requests:
			rctx, cancel := context.WithTimeout(ctx, reloadTimeout(holder.Get()))
			reply <- rl.apply(rctx, plugins)
			cancel()
			intake.Sync()
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				rctx, cancel := context.WithTimeout(ctx, reloadTimeout(holder.Get()))
				_ = rl.apply(rctx, plugins)
				cancel()
				intake.Sync()
				continue
			}
			log.Info("signal received; draining", "signal", sig.String(), "shutdown_timeout", holder.Get().Daemon.ShutdownTimeout.String())
			break loop
		}
	}

	_ = notifier.Stopping("draining")
	admin.Drain()
	stopCtx, cancel := context.WithTimeout(context.Background(), holder.Get().Daemon.ShutdownTimeout.Duration)
	defer cancel()
	stopErr := fxApp.Stop(stopCtx)
	plugin.CleanupClients()
	if stopErr != nil {
		log.Error("shutdown finished with errors", "error", stopErr)
		return stopErr
	}
	log.Info("lifecycled stopped")
	return nil
}

func startTimeout(cfg *config.Config) time.Duration {
	n := time.Duration(len(cfg.Instances()) + 1)
	return 30*time.Second + n*cfg.Plugins.StartTimeout.Duration
}

// startupError returns the cause of a failed start without fx's wrapping
// ("could not build arguments for function ... failed to build ..."), and
// marks what restarting cannot fix as a ConfigError (exit 78, which the unit
// lists in RestartPreventExitStatus): config problems, a state-store schema
// newer than this binary, and a state store that refuses our credentials.
func startupError(err error) error {
	cause := dig.RootCause(err)
	var ce *config.Error
	var conf *ConfigError
	switch {
	case errors.As(err, &conf):
		return conf
	case errors.As(err, &ce):
		return &ConfigError{Err: ce}
	case errors.Is(err, migrations.ErrSchemaNewer):
		return &ConfigError{Err: cause}
	case credentialsRefused(err):
		return &ConfigError{Err: cause}
	}
	return cause
}

// credentialsRefused reports a PostgreSQL state store that refused the
// login (class 28: invalid authorization, wrong password, no such role) or
// names a database that does not exist (3D000).
func credentialsRefused(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "28") || pgErr.Code == "3D000")
}

// statusLine is systemd's STATUS=. A plugin that is not running leaves the
// daemon ready (the others work, and jobs needing it wait and retry) but
// degraded, and the line names it, so that `systemctl status` shows what
// to fix; /readyz answers 503 for the same reason.
func statusLine(h *pluginhost.Host, state string) string {
	infos := h.Status()
	up := 0
	var down []string
	for _, i := range infos {
		if i.State == pluginhost.StateRunning && i.Store.State == pluginhost.StoreDown {
			up++
			down = append(down, fmt.Sprintf("%s: store down since %s: %s", i.Name, i.Store.Since.Format(time.RFC3339), clip(i.Store.Error)))
			continue
		}
		if i.State == pluginhost.StateRunning {
			up++
			continue
		}
		reason := string(i.State)
		if i.LastError != "" {
			reason = clip(strings.TrimPrefix(i.LastError, "plugin "+i.Name+": "))
		}
		down = append(down, fmt.Sprintf("%s: %s", i.Name, reason))
	}
	if len(down) > 0 && state == "ready" {
		state = "degraded"
	}
	line := fmt.Sprintf("%s; %d/%d plugins running", state, up, len(infos))
	if len(down) > 0 {
		line += "; " + strings.Join(down, "; ")
	}
	return line
}

// clip keeps a status line's reason short: systemd shows one line.
func clip(reason string) string {
	if len(reason) > 200 {
		return reason[:197] + "..."
	}
	return reason
}

func restartOnlyChanges(a, b *config.Config) []string {
	var out []string
	if a.Daemon.State != b.Daemon.State || a.Daemon.StatePasswordFile != b.Daemon.StatePasswordFile {
		out = append(out, "daemon.state")
	}
	if a.Admin.Listen != b.Admin.Listen || a.Admin.SocketMode != b.Admin.SocketMode || a.Admin.SocketGroup != b.Admin.SocketGroup {
		out = append(out, "admin.listen/socket_mode/socket_group")
	}
	if a.Admin.MetricsListen != b.Admin.MetricsListen {
		out = append(out, "admin.metrics_listen")
	}
	if a.Admin.Pprof != b.Admin.Pprof {
		out = append(out, "admin.pprof")
	}
	if a.Daemon.LogFormat != b.Daemon.LogFormat {
		out = append(out, "daemon.log_format")
	}
	// The receipt key is loaded (or generated) once, at start.
	if a.Deletion.ReceiptKeyFile != b.Deletion.ReceiptKeyFile {
		out = append(out, "deletion.receipt_key_file")
	}
	return out
}

func newRegistry() (*prometheus.Registry, prometheus.Registerer) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	bi := buildinfo.Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "lifecycled_build_info",
		Help:        "Build information of the running lifecycled; always 1.",
		ConstLabels: prometheus.Labels{"version": bi.Version, "commit": bi.Commit, "goversion": bi.GoVersion, "plugin_protocol": fmt.Sprint(bi.PluginProtocol)},
	})
	g.Set(1)
	reg.MustRegister(g)
	return reg, reg
}

func newStore(lc fx.Lifecycle, holder *config.Holder, log hclog.Logger) (store.Store, error) {
	cfg := holder.Get()
	kind, dsn, err := cfg.StateDSN()
	if err != nil {
		return nil, &ConfigError{Err: err}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := store.Open(ctx, migrations.Dialect(kind), dsn)
	if err != nil {
		return nil, fmt.Errorf("state store (%s): %w", kind, err)
	}
	log.Named("store").Info("state store open", "dialect", kind, "location", config.RedactURL(dsn))
	lc.Append(fx.StopHook(st.Close))
	return st, nil
}

func newPluginHost(lc fx.Lifecycle, holder *config.Holder, log hclog.Logger, reg prometheus.Registerer) *pluginhost.Host {
	h := pluginhost.New(PluginOptions(holder.Get()), log, reg)
	health := func() (time.Duration, time.Duration) {
		p := holder.Get().Plugins
		return p.HealthInterval.Duration, p.HealthTimeout.Duration
	}
	watch, stopWatch := context.WithCancel(context.Background())
	lc.Append(fx.Hook{
		OnStart: func(ctx context.Context) error {
			if err := h.Start(ctx); err != nil {
				return err
			}
			// The first probe before the daemon says it is ready, so that
			// a store down at start is in the first status line.
			if interval, timeout := health(); interval > 0 {
				h.ProbeStores(ctx, timeout)
			}
			go h.WatchStores(watch, health)
			return nil
		},
		OnStop: func(ctx context.Context) error {
			stopWatch()
			return h.Stop(ctx)
		},
	})
	return h
}

// adminRoutes collects the route sets other modules contribute.
type adminRoutes struct {
	fx.In
	Routes []func(*http.ServeMux) `group:"admin_routes"`
	Checks []adminapi.Check       `group:"ready_checks"`
}

func newAdminServer(lc fx.Lifecycle, holder *config.Holder, log hclog.Logger, reg *prometheus.Registry,
	st store.Store, plugins *pluginhost.Host, rl *reloader, extra adminRoutes) (*adminapi.Server, error) {
	cfg := holder.Get()
	path, err := cfg.SocketPath()
	if err != nil {
		return nil, &ConfigError{Err: err}
	}
	mode, err := cfg.SocketFileMode()
	if err != nil {
		return nil, &ConfigError{Err: err}
	}
	started := time.Now()
	var srv *adminapi.Server
	routes := []func(*http.ServeMux){
		adminapi.StatusRoutes(st, string(st.Dialect()), plugins, started, func() bool { return srv.Draining() },
			func() time.Duration { return holder.Get().Plugins.HealthTimeout.Duration }),
		adminapi.ReloadRoutes(rl.request),
	}
	routes = append(routes, extra.Routes...)
	policy := func() adminapi.AccessPolicy {
		a := holder.Get().Admin
		return adminapi.AccessPolicy{AllowUIDs: a.AllowUIDs, AllowGIDs: a.AllowGIDs, ReadOnlyUIDs: a.ReadOnlyUIDs, ReadOnlyGIDs: a.ReadOnlyGIDs}
	}
	// The console is a view of the API: it calls the server's own handler,
	// which exists only once the routes (the console's among them) do.
	ui := console.New(console.Options{Logger: log, MayMutate: func(r *http.Request) bool {
		return policy().MayMutate(adminapi.Peer(r.Context()))
	}})
	routes = append(routes, ui.Routes)
	srv = adminapi.New(adminapi.Options{
		Logger:        log,
		Socket:        adminapi.SocketOptions{Path: path, Mode: os.FileMode(mode), Group: cfg.Admin.SocketGroup},
		MetricsListen: cfg.Admin.MetricsListen,
		Pprof:         cfg.Admin.Pprof,
		Policy:        policy,
		Registry:      reg,
		Gatherer:      reg,
		Checks: func() []adminapi.Check {
			checks := []adminapi.Check{{Name: "state_store", Fn: st.Ping}}
			for _, info := range plugins.Status() {
				name := info.Name
				checks = append(checks, adminapi.Check{Name: "plugin:" + name, Fn: func(context.Context) error { return plugins.Check(name) }})
			}
			return append(checks, extra.Checks...)
		},
		ProbeStores: func(ctx context.Context) { plugins.ProbeStores(ctx, holder.Get().Plugins.HealthTimeout.Duration) },
		Routes:      routes,
		Idempotency: &adminapi.IdempotencyOptions{
			Store:          st,
			TTL:            func() time.Duration { return holder.Get().Idempotency.TTL.Duration },
			MismatchStatus: func() int { return holder.Get().Idempotency.MismatchStatus },
			LockTimeout:    func() time.Duration { return holder.Get().Idempotency.LockTimeout.Duration },
			CanonicalURI:   adminapi.CanonicalTenantURI(func() string { return holder.Get().Daemon.TenantIDFormat }),
		},
	})
	ui.SetAPI(srv.Handler())
	lc.Append(fx.Hook{OnStart: srv.Start, OnStop: srv.Stop})
	return srv, nil
}
