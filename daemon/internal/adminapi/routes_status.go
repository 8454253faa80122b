package adminapi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/buildinfo"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/pluginhost"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

// StatusStore is what the status route needs from the state store.
type StatusStore interface {
	Ping(ctx context.Context) error
	DLQTopics(ctx context.Context) ([]dlq.TopicSummary, error)
}

// Plugins is what the plugin routes need from the plugin host.
type Plugins interface {
	Status() []pluginhost.Info
	// ProbeStores probes every plugin's store now (?probe), each within
	// timeout.
	ProbeStores(ctx context.Context, timeout time.Duration) bool
}

// StatusRoutes serves /api/v1/status, /api/v1/version and /api/v1/plugins.
// probeTimeout bounds each store probe of ?probe.
func StatusRoutes(st StatusStore, dialect string, plugins Plugins, started time.Time, draining func() bool,
	probeTimeout func() time.Duration) func(*http.ServeMux) {
	return func(mux *http.ServeMux) {
		g := routeGroup{mux: mux, scope: ScopeNone}
		g.handle("GET /api/v1/version", func(r *http.Request) (any, error) {
			return buildinfo.Get(), nil
		})
		g.handle("GET /api/v1/plugins", func(r *http.Request) (any, error) {
			probeIfAsked(r, plugins, probeTimeout)
			body := wire.Plugins{Plugins: []wire.Plugin{}}
			for _, p := range plugins.Status() {
				body.Plugins = append(body.Plugins, pluginJSON(p))
			}
			return body, nil
		})
		g.handle("GET /api/v1/status", func(r *http.Request) (any, error) {
			probeIfAsked(r, plugins, probeTimeout)
			ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
			defer cancel()
			body := wire.Status{
				Version:       buildinfo.Get(),
				StartedAt:     started.UTC().Format(time.RFC3339),
				UptimeSeconds: int64(time.Since(started).Seconds()),
				Degraded:      []string{},
				StateStore:    wire.StoreStatus{Dialect: dialect, OK: true},
				Plugins:       []wire.PluginSummary{},
				DLQ:           wire.DLQSummary{Counts: map[string]int64{}},
			}
			for _, s := range dlq.Statuses {
				body.DLQ.Counts[string(s)] = 0
			}
			if err := st.Ping(ctx); err != nil {
				body.StateStore.OK, body.StateStore.Error = false, err.Error()
				body.Degraded = append(body.Degraded, "state store: "+err.Error())
				body.DLQ.Counts, body.DLQ.Error = nil, "unknown: the state store is unavailable"
			} else if topics, err := st.DLQTopics(ctx); err != nil {
				body.Degraded = append(body.Degraded, "dlq summary: "+err.Error())
				body.DLQ.Counts, body.DLQ.Error = nil, "unknown: "+err.Error()
			} else {
				body.DLQ.Topics = len(topics)
				var oldest *time.Time
				for _, t := range topics {
					for s, n := range t.Counts {
						body.DLQ.Counts[string(s)] += n
					}
					if t.OldestPendingAt != nil && (oldest == nil || t.OldestPendingAt.Before(*oldest)) {
						oldest = t.OldestPendingAt
					}
				}
				if oldest != nil {
					s := oldest.UTC().Format(wire.TimeFormat)
					body.DLQ.OldestPendingAt = &s
				}
			}
			for _, p := range plugins.Status() {
				body.Plugins = append(body.Plugins, wire.PluginSummary{Name: p.Name, Kind: p.Kind, State: string(p.State), Restarts: p.Restarts,
					LastError: p.LastError, Store: storeJSON(p.Store)})
				switch {
				case p.State != pluginhost.StateRunning:
					body.Degraded = append(body.Degraded, fmt.Sprintf("plugin %s is %s", p.Name, p.State))
				case p.Store.State == pluginhost.StoreDown:
					body.Degraded = append(body.Degraded, fmt.Sprintf("plugin %s: store down since %s: %s", p.Name,
						formatTime(*p.Store.Since), p.Store.Error))
				}
			}
			if draining() {
				body.Degraded = append(body.Degraded, "draining: shutting down")
			}
			body.Ready = len(body.Degraded) == 0
			return body, nil
		})
	}
}

// probeIfAsked probes every plugin's store before answering when the
// request says ?probe: an operator checking a store just brought back need
// not wait for the next round.
func probeIfAsked(r *http.Request, plugins Plugins, timeout func() time.Duration) {
	if _, ok := r.URL.Query()["probe"]; ok {
		plugins.ProbeStores(r.Context(), timeout())
	}
}
