package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lifecycled/lifecycled/sdk"
)

// Store health: a plugin process can run while its store is down (the
// database stopped, the broker unreachable). Each running plugin's Health
// call (sdk.HealthChecker) is its store's probe; the host runs the probes
// on an interval and on demand, and keeps the last answer with when its
// state began, so that readiness, status, systemd's status line, metrics
// and the console say "down since" before an erasure or a retry fails.

// StoreState is what the last probe said of a plugin's store.
type StoreState string

// Store states. Unknown: never probed, the plugin is not running, or it
// does not implement Health (built before it): never taken for up.
const (
	StoreUnknown StoreState = "unknown"
	StoreUp      StoreState = "up"
	StoreDown    StoreState = "down"
)

// StoreHealth is a plugin's store as the last probe found it.
type StoreHealth struct {
	State StoreState
	// Error is why it is down, or why its state is unknown.
	Error string
	// Since is when the state began (the first probe that found it);
	// CheckedAt the last probe. Nil before the first probe.
	Since, CheckedAt *time.Time
}

// healthProber is what a running plugin's client offers (sdk/host's
// clients do; a protocol 2 source answers Unsupported).
type healthProber interface {
	Health(ctx context.Context) error
}

// probe asks the instance's plugin whether its store answers, within
// timeout, and records the answer. It reports whether the state changed.
func (in *instance) probe(ctx context.Context, timeout time.Duration) bool {
	in.mu.Lock()
	var p any = in.deleter
	if in.cfg.Kind == KindDLQSource {
		p = in.source
	}
	running := in.state == StateRunning
	in.mu.Unlock()
	state, why := StoreUnknown, "the plugin is not running"
	if hp, ok := p.(healthProber); ok && running {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		start := time.Now()
		err := hp.Health(pctx)
		// The plugin may end the call first, as its end of the deadline
		// passes (gRPC's CANCEL): late all the same.
		late := pctx.Err() == context.DeadlineExceeded || time.Since(start) >= timeout
		cancel()
		switch {
		case err == nil:
			state, why = StoreUp, ""
		case errors.Is(err, sdk.ErrUnsupported):
			state, why = StoreUnknown, "the plugin does not probe its store (it predates the Health call)"
		case ctx.Err() != nil:
			return false // the daemon is stopping: nothing was learnt
		case late:
			state, why = StoreDown, fmt.Sprintf("no answer within %s", timeout)
		default:
			state, why = StoreDown, err.Error()
		}
	}
	return in.setStore(state, why)
}

// setStore records a probe's outcome and the metric; true when the state
// (not only the error text) changed.
func (in *instance) setStore(state StoreState, why string) bool {
	now := time.Now().UTC()
	in.mu.Lock()
	changed := in.store.State != state
	if changed || in.store.Since == nil {
		in.store.Since = &now
	}
	in.store.State, in.store.Error, in.store.CheckedAt = state, why, &now
	in.mu.Unlock()
	g := in.metrics.storeUp
	switch state {
	case StoreUp:
		g.WithLabelValues(in.cfg.Name, string(in.cfg.Kind)).Set(1)
	case StoreDown:
		g.WithLabelValues(in.cfg.Name, string(in.cfg.Kind)).Set(0)
	default:
		// Unknown is no sample, rather than a value an alert could take
		// for up or down.
		g.DeleteLabelValues(in.cfg.Name, string(in.cfg.Kind))
	}
	return changed
}

func (in *instance) storeHealth() StoreHealth {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.store
}

// ProbeStores probes every plugin's store now, all at once, each within
// timeout, and reports whether any state changed.
func (h *Host) ProbeStores(ctx context.Context, timeout time.Duration) bool {
	h.mu.Lock()
	all := make([]*instance, 0, len(h.instances))
	for _, in := range h.instances {
		all = append(all, in)
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	var mu sync.Mutex
	changed := false
	for _, in := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c := in.probe(ctx, timeout); c {
				mu.Lock()
				changed = true
				mu.Unlock()
				st := in.storeHealth()
				if st.State == StoreDown {
					h.log.Warn("a plugin's store is down", "plugin", in.cfg.Name, "error", st.Error)
				} else {
					h.log.Info("a plugin's store is "+string(st.State), "plugin", in.cfg.Name, "detail", st.Error)
				}
			}
		}()
	}
	wg.Wait()
	return changed
}

// StoreChanges has a value after a probe round in which some store's
// state changed (the daemon updates systemd's status line then).
func (h *Host) StoreChanges() <-chan struct{} { return h.storeChanges }

// WatchStores probes every plugin's store each interval until ctx ends;
// settings gives the interval and each probe's timeout, read again every
// round (a reload may change them). An interval of 0 turns the probes off:
// every store is then unknown.
func (h *Host) WatchStores(ctx context.Context, settings func() (interval, timeout time.Duration)) {
	for {
		interval, timeout := settings()
		if interval <= 0 {
			h.forgetStores("store probes are off (plugins.health_interval = \"0s\")")
			interval = 5 * time.Second
		} else if h.ProbeStores(ctx, timeout) {
			select {
			case h.storeChanges <- struct{}{}:
			default:
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

// forgetStores makes every store unknown, saying why.
func (h *Host) forgetStores(why string) {
	h.mu.Lock()
	all := make([]*instance, 0, len(h.instances))
	for _, in := range h.instances {
		all = append(all, in)
	}
	h.mu.Unlock()
	for _, in := range all {
		in.setStore(StoreUnknown, why)
	}
}
