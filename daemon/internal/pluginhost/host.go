// Package pluginhost launches, verifies, supervises and dispenses the
// daemon's plugins. Each [[deleter]] and [[dlq_source]] block becomes one
// plugin process (lifecycled-plugin-<plugin> from plugin_dir, or path),
// started through hashicorp/go-plugin with protocol version 1, gRPC only,
// AutoMTLS, an optional SHA-256 check, no inherited environment, and
// Pdeathsig so that no plugin outlives the daemon.
//
// go-plugin never restarts a plugin and a dead client cannot be started
// again, so each instance has a supervisor that builds a new client after a
// crash, with capped exponential backoff, and counts the restarts. Callers
// get handles (sdk.TenantDeleter, sdk.DLQSource) that always route to the
// current process and answer a retryable error while it is down: a plugin
// crash never takes the daemon down.
package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lifecycled/lifecycled/sdk"
)

// ErrUnknownPlugin means no configured block has the name asked for.
var ErrUnknownPlugin = errors.New("no such plugin")

// Host owns every plugin instance.
type Host struct {
	log     hclog.Logger
	metrics *metrics

	mu        sync.Mutex
	opts      Options
	instances map[string]*instance
	order     []string
	stopped   bool
	// storeChanges signals a probe round that changed a store's state.
	storeChanges chan struct{}
}

// New returns a host for opts; Start launches the plugins.
func New(opts Options, log hclog.Logger, reg prometheus.Registerer) *Host {
	return &Host{log: log.Named("plugin"), metrics: newMetrics(reg), opts: opts, instances: map[string]*instance{},
		storeChanges: make(chan struct{}, 1)}
}

// Start launches every configured plugin and waits until each finished its
// first attempt (handshake and Configure), successful or not. A plugin that
// failed is retried in the background; Start itself only fails when ctx ends.
func (h *Host) Start(ctx context.Context) error {
	h.mu.Lock()
	var started []*instance
	for _, p := range h.opts.Plugins {
		in := h.newInstance(p)
		h.instances[p.Name] = in
		h.order = append(h.order, p.Name)
		started = append(started, in)
	}
	h.mu.Unlock()
	for _, in := range started {
		go in.supervise()
	}
	for _, in := range started {
		select {
		case <-in.firstAttempt:
		case <-ctx.Done():
			return fmt.Errorf("waiting for plugin %s: %w", in.cfg.Name, ctx.Err())
		}
	}
	return nil
}

func (h *Host) newInstance(p Plugin) *instance {
	return newInstance(p, h.log.Named(p.Name), h.metrics)
}

// Stop stops every plugin, each within its shutdown timeout. Safe to call twice.
func (h *Host) Stop(ctx context.Context) error {
	h.mu.Lock()
	h.stopped = true
	all := make([]*instance, 0, len(h.instances))
	for _, in := range h.instances {
		all = append(all, in)
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, in := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in.stop(ctx)
		}()
	}
	wg.Wait()
	return nil
}

// Reconcile applies a reloaded config, or refuses it: plugins that are new
// or changed (binary path, checksum, timeouts, config, or the daemon's
// tenant_id_format, which every plugin is configured with), and those whose
// binary on disk changed since they started, are started as
// new instances first, while the running ones keep serving. Only when every
// one of them started and accepted its config are the changed and removed
// instances stopped and the new ones put in their place; otherwise the new
// instances are stopped, nothing changes, and the error names each plugin
// that refused and why. Unchanged plugins keep running untouched.
func (h *Host) Reconcile(ctx context.Context, opts Options) error {
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		return errors.New("the plugin host is stopped")
	}
	want := map[string]Plugin{}
	var order []string
	for _, p := range opts.Plugins {
		want[p.Name] = p
		order = append(order, p.Name)
	}
	var candidates []*instance
	replaced := map[string]bool{}
	for _, name := range order {
		if in, ok := h.instances[name]; ok && !changed(in.cfg, want[name]) && !binaryChanged(in) {
			continue
		}
		replaced[name] = true
		candidates = append(candidates, h.newInstance(want[name]))
	}
	h.mu.Unlock()

	for _, in := range candidates {
		h.log.Info("starting plugin added or changed by reload", "name", in.cfg.Name)
		go in.supervise()
	}
	var refused []string
	for _, in := range candidates {
		select {
		case <-in.firstAttempt:
		case <-ctx.Done():
		}
		if st := in.status(); st.State != StateRunning {
			why := st.LastError
			if why == "" {
				why = string(st.State)
			}
			refused = append(refused, why)
		}
	}
	if len(refused) > 0 {
		for _, in := range candidates {
			in.stop(ctx)
		}
		return fmt.Errorf("%w: %s", ErrReloadRefused, strings.Join(refused, "; "))
	}

	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		for _, in := range candidates {
			in.stop(ctx)
		}
		return errors.New("the plugin host is stopped")
	}
	var toStop []*instance
	for name, in := range h.instances {
		if _, keep := want[name]; !keep || replaced[name] {
			toStop = append(toStop, in)
			delete(h.instances, name)
		}
	}
	for _, in := range candidates {
		h.instances[in.cfg.Name] = in
	}
	h.order, h.opts = order, opts
	h.mu.Unlock()
	for _, in := range toStop {
		h.log.Info("stopping plugin removed or replaced by reload", "name", in.cfg.Name)
		in.stop(ctx)
	}
	return nil
}

// binaryChanged reports whether the running instance's binary on disk is no
// longer the one it was started from (an upgraded package, a rebuilt
// plugin): a reload then restarts it, as it does for a changed config. A
// binary that cannot be read is left to the new instance's start to report.
func binaryChanged(in *instance) bool {
	in.mu.Lock()
	started := in.sum
	in.mu.Unlock()
	if started == "" {
		return false
	}
	now, err := fileSHA256(in.cfg.Path)
	return err != nil || now != started
}

// ErrReloadRefused means a reload's new or changed plugins did not all start
// with their new config; the running ones were kept.
var ErrReloadRefused = errors.New("reload refused: the running plugins were kept")

// changed reports whether b differs from a in what needs a restart.
func changed(a, b Plugin) bool {
	return a.Kind != b.Kind || a.Path != b.Path || a.SHA256 != b.SHA256 ||
		a.StartTimeout != b.StartTimeout || a.CallTimeout != b.CallTimeout || a.DeleteTimeout != b.DeleteTimeout ||
		a.ShutdownTimeout != b.ShutdownTimeout ||
		!reflect.DeepEqual(a.Config, b.Config) || !reflect.DeepEqual(a.Env, b.Env) || a.GOMAXPROCS != b.GOMAXPROCS ||
		a.TenantIDFormat != b.TenantIDFormat || a.MaxMessageBytes != b.MaxMessageBytes
}

func (h *Host) get(name string, kind Kind) (*instance, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	in, ok := h.instances[name]
	if !ok || in.cfg.Kind != kind {
		return nil, fmt.Errorf("%w: %s %q", ErrUnknownPlugin, kind, name)
	}
	return in, nil
}

// Deleter returns a handle to the named deleter plugin.
func (h *Host) Deleter(name string) (sdk.TenantDeleter, error) {
	in, err := h.get(name, KindDeleter)
	if err != nil {
		return nil, err
	}
	return &deleterHandle{in: in}, nil
}

// Source returns a handle to the named DLQ source plugin.
func (h *Host) Source(name string) (sdk.DLQSource, error) {
	in, err := h.get(name, KindDLQSource)
	if err != nil {
		return nil, err
	}
	return &sourceHandle{in: in}, nil
}

// Names returns the configured plugin names of a kind, in config order.
func (h *Host) Names(kind Kind) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, name := range h.order {
		if in := h.instances[name]; in != nil && in.cfg.Kind == kind {
			out = append(out, name)
		}
	}
	return out
}

// Running reports whether the named plugin is up now.
func (h *Host) Running(name string) bool {
	h.mu.Lock()
	in := h.instances[name]
	h.mu.Unlock()
	return in != nil && in.status().State == StateRunning
}

// Traits are what the named DLQ source declared at its last start; zero
// when it is not running (sdk.SourceTraits.Check then fails).
func (h *Host) Traits(name string) sdk.SourceTraits {
	in, err := h.get(name, KindDLQSource)
	if err != nil {
		return sdk.SourceTraits{}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.state != StateRunning {
		return sdk.SourceTraits{}
	}
	return in.traits
}

// Status describes every plugin, in config order.
func (h *Host) Status() []Info {
	h.mu.Lock()
	all := make([]*instance, 0, len(h.order))
	for _, name := range h.order {
		if in := h.instances[name]; in != nil {
			all = append(all, in)
		}
	}
	h.mu.Unlock()
	out := make([]Info, 0, len(all))
	for _, in := range all {
		out = append(out, in.status())
	}
	return out
}

// Check reports why the named plugin is not ready: its process is not
// running, or the last probe found its store down.
func (h *Host) Check(name string) error {
	h.mu.Lock()
	in := h.instances[name]
	h.mu.Unlock()
	if in == nil {
		return fmt.Errorf("%w: %q", ErrUnknownPlugin, name)
	}
	st := in.status()
	if st.State != StateRunning {
		if st.LastError != "" {
			return fmt.Errorf("%s: %s", st.State, st.LastError)
		}
		return errors.New(string(st.State))
	}
	if st.Store.State == StoreDown {
		return fmt.Errorf("store down since %s: %s", st.Store.Since.Format(time.RFC3339), st.Store.Error)
	}
	return nil
}

// DeleterNames lists the configured deleters in config order.
func (h *Host) DeleterNames() []string { return h.Names(KindDeleter) }

// SourceNames lists the configured DLQ sources in config order.
func (h *Host) SourceNames() []string { return h.Names(KindDLQSource) }
