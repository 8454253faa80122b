package app

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lifecycled/lifecycled/daemon/internal/config"
	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
	"github.com/lifecycled/lifecycled/daemon/internal/pluginhost"
	"github.com/lifecycled/lifecycled/daemon/internal/sdnotify"
)

// reloader applies config reloads one at a time, asked by SIGHUP or by
// POST /api/v1/reload (which `lifecycled reload`, the unit's ExecReload,
// calls so that a refused reload makes `systemctl reload` fail). A reload
// is all or nothing: an invalid file, or a new or changed plugin that does
// not start with its new config, keeps everything as it was.
type reloader struct {
	path     string
	holder   *config.Holder
	log      hclog.Logger
	notifier sdnotify.Notifier
	requests chan chan error

	mu      sync.Mutex
	lastErr error

	successful prometheus.Gauge
	lastOK     prometheus.Gauge
}

func newReloader(path string, holder *config.Holder, log hclog.Logger, n sdnotify.Notifier, reg prometheus.Registerer) *reloader {
	r := &reloader{path: path, holder: holder, log: log, notifier: n, requests: make(chan chan error),
		successful: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "lifecycled_config_last_reload_successful",
			Help: "Whether the last config reload was applied (1) or refused (0); 1 before any.",
		}),
		lastOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "lifecycled_config_last_reload_success_timestamp_seconds",
			Help: "When the config was last loaded or reloaded successfully (Unix time).",
		}),
	}
	r.successful.Set(1)
	r.lastOK.SetToCurrentTime()
	if reg != nil {
		reg.MustRegister(r.successful, r.lastOK)
	}
	return r
}

// request asks the main loop for a reload and waits for its outcome.
func (r *reloader) request(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case r.requests <- reply:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// apply reloads the config file: validate it, start new and changed
// plugins with it, and only then swap it in.
func (r *reloader) apply(ctx context.Context, plugins *pluginhost.Host) error {
	_ = r.notifier.Reloading()
	err := r.applyConfig(ctx, plugins)
	r.mu.Lock()
	r.lastErr = err
	r.mu.Unlock()
	if err != nil {
		err = fmt.Errorf("%w: %w", derrors.ErrConflict, err)
		r.successful.Set(0)
		r.log.Error("reload refused; the running config and plugins were kept", "error", err)
	} else {
		r.successful.Set(1)
		r.lastOK.SetToCurrentTime()
		r.log.Info("config reloaded", "path", r.path)
	}
	_ = r.notifier.Ready(r.status(plugins))
	return err
}

func (r *reloader) applyConfig(ctx context.Context, plugins *pluginhost.Host) error {
	next, err := config.Load(r.path)
	if err != nil {
		return fmt.Errorf("%w: %v", errReloadInvalid, err)
	}
	prev := r.holder.Get()
	if restartOnly := restartOnlyChanges(prev, next); len(restartOnly) > 0 {
		r.log.Warn("reload: some settings only take effect after a restart", "settings", restartOnly)
	}
	if err := plugins.Reconcile(ctx, PluginOptions(next)); err != nil {
		return err
	}
	r.holder.Set(next)
	if l, ok := r.log.(interface{ SetLevel(hclog.Level) }); ok {
		l.SetLevel(hclog.LevelFromString(next.Daemon.LogLevel))
	}
	return nil
}

var errReloadInvalid = errors.New("reload refused: the new config is invalid")

// status is the STATUS= line, with a refused last reload named.
func (r *reloader) status(plugins *pluginhost.Host) string {
	line := statusLine(plugins, "ready")
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lastErr != nil {
		why := r.lastErr.Error()
		if len(why) > 200 {
			why = why[:197] + "..."
		}
		line += "; last reload refused: " + why
	}
	return line
}

// reloadTimeout bounds one reload: every new plugin's start.
func reloadTimeout(cfg *config.Config) time.Duration {
	return time.Duration(len(cfg.Instances())+1)*cfg.Plugins.StartTimeout.Duration + 30*time.Second
}
