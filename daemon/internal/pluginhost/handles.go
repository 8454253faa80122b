package pluginhost

import (
	"context"
	"fmt"
	"time"

	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/host"
)

// unavailable is the error callers get while a plugin is not running: a
// retryable one, so jobs and retries wait for the restart instead of failing.
// A deleter whose Configure refused its config at the last start answers
// that refusal instead, permanent: a job waiting for it would retry
// forever, and what it needs is an operator (a fixed config and a reload,
// a fixed schema).
func (in *instance) unavailable() error {
	st := in.status()
	in.mu.Lock()
	refused := in.refused
	in.mu.Unlock()
	if refused != nil && in.cfg.Kind == KindDeleter {
		return sdk.Permanent(fmt.Errorf("plugin %s refuses its config (fix the config or the store, then reload): %w", in.cfg.Name, refused))
	}
	msg := fmt.Sprintf("plugin %s is %s", in.cfg.Name, st.State)
	if st.LastError != "" {
		msg += ": " + st.LastError
	}
	return sdk.Unavailable(fmt.Errorf("%s", msg))
}

// observe records a call's latency and outcome, and wakes the supervisor
// when the call failed because the process or connection is gone.
func (in *instance) observe(method string, start time.Time, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
		if host.IsTransportFailure(err) {
			in.notifyFailure()
		}
	}
	in.metrics.rpc.WithLabelValues(in.cfg.Name, method, outcome).Observe(time.Since(start).Seconds())
}

// call runs one RPC on the plugin's client of the moment, read under the
// lock, so a call never reaches a client the supervisor is replacing, with
// its own deadline and recorded in the metrics.
func call[C, R any](ctx context.Context, in *instance, method string, timeout time.Duration,
	client func() C, fn func(context.Context, C) (R, error)) (R, error) {
	in.mu.Lock()
	c := client()
	running := in.state == StateRunning
	in.mu.Unlock()
	if any(c) == nil || !running {
		var zero R
		return zero, in.unavailable()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	resp, err := fn(ctx, c)
	in.observe(method, start, err)
	return resp, err
}

type deleterHandle struct{ in *instance }

func (h *deleterHandle) client() sdk.TenantDeleter { return h.in.deleter }

// Configure is done by the supervisor after each start; callers may not
// reconfigure a running plugin behind its back.
func (h *deleterHandle) Configure(context.Context, *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	return nil, sdk.ErrUnsupported
}

func (h *deleterHandle) Count(ctx context.Context, req *sdk.CountRequest) (*sdk.CountResponse, error) {
	return call(ctx, h.in, "Count", h.in.cfg.CallTimeout, h.client,
		func(ctx context.Context, d sdk.TenantDeleter) (*sdk.CountResponse, error) { return d.Count(ctx, req) })
}

func (h *deleterHandle) Delete(ctx context.Context, req *sdk.DeleteRequest, progress sdk.Progress) (*sdk.DeleteResponse, error) {
	return call(ctx, h.in, "Delete", h.in.cfg.DeleteTimeout, h.client,
		func(ctx context.Context, d sdk.TenantDeleter) (*sdk.DeleteResponse, error) {
			return d.Delete(ctx, req, progress)
		})
}

type sourceHandle struct{ in *instance }

func (h *sourceHandle) client() sdk.DLQSource { return h.in.source }

func (h *sourceHandle) Configure(context.Context, *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	return nil, sdk.ErrUnsupported
}

func (h *sourceHandle) Fetch(ctx context.Context, req *sdk.FetchRequest) (*sdk.FetchResponse, error) {
	// A fetch waits up to req.Wait by design; the call timeout comes on top.
	return call(ctx, h.in, "Fetch", h.in.cfg.CallTimeout+req.Wait, h.client,
		func(ctx context.Context, s sdk.DLQSource) (*sdk.FetchResponse, error) { return s.Fetch(ctx, req) })
}

func (h *sourceHandle) Commit(ctx context.Context, req *sdk.CommitRequest) (*sdk.CommitResponse, error) {
	return call(ctx, h.in, "Commit", h.in.cfg.CallTimeout, h.client,
		func(ctx context.Context, s sdk.DLQSource) (*sdk.CommitResponse, error) { return s.Commit(ctx, req) })
}

func (h *sourceHandle) Republish(ctx context.Context, req *sdk.RepublishRequest) (*sdk.RepublishResponse, error) {
	return call(ctx, h.in, "Republish", h.in.cfg.CallTimeout, h.client,
		func(ctx context.Context, s sdk.DLQSource) (*sdk.RepublishResponse, error) {
			return s.Republish(ctx, req)
		})
}
