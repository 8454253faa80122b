package pluginhost

import (
	"context"
	"fmt"
	"time"

	"github.com/lifecycled/lifecycled/sdk"
)

// unavailable is the error callers get while a plugin is not running: a
// retryable one, so jobs and retries wait for the restart instead of failing.
func (in *instance) unavailable() error {
	st := in.status()
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
		if sdk.IsTransportFailure(err) {
			in.notifyFailure()
		}
	}
	in.metrics.rpc.WithLabelValues(in.cfg.Name, method, outcome).Observe(time.Since(start).Seconds())
}

type deleterHandle struct{ in *instance }

func (h *deleterHandle) current() (sdk.TenantDeleter, error) {
	h.in.mu.Lock()
	d := h.in.deleter
	running := h.in.state == StateRunning
	h.in.mu.Unlock()
	if d == nil || !running {
		return nil, h.in.unavailable()
	}
	return d, nil
}

// Configure is done by the supervisor after each start; callers may not
// reconfigure a running plugin behind its back.
func (h *deleterHandle) Configure(context.Context, *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	return nil, sdk.ErrUnsupported
}

func (h *deleterHandle) Count(ctx context.Context, req *sdk.CountRequest) (*sdk.CountResponse, error) {
	d, err := h.current()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, h.in.cfg.CallTimeout)
	defer cancel()
	start := time.Now()
	resp, err := d.Count(ctx, req)
	h.in.observe("Count", start, err)
	return resp, err
}

func (h *deleterHandle) Delete(ctx context.Context, req *sdk.DeleteRequest, progress sdk.Progress) (*sdk.DeleteResponse, error) {
	d, err := h.current()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, h.in.cfg.DeleteTimeout)
	defer cancel()
	start := time.Now()
	resp, err := d.Delete(ctx, req, progress)
	h.in.observe("Delete", start, err)
	return resp, err
}

type sourceHandle struct{ in *instance }

func (h *sourceHandle) current() (sdk.DLQSource, error) {
	h.in.mu.Lock()
	s := h.in.source
	running := h.in.state == StateRunning
	h.in.mu.Unlock()
	if s == nil || !running {
		return nil, h.in.unavailable()
	}
	return s, nil
}

func (h *sourceHandle) Configure(context.Context, *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	return nil, sdk.ErrUnsupported
}

func (h *sourceHandle) Fetch(ctx context.Context, req *sdk.FetchRequest) (*sdk.FetchResponse, error) {
	s, err := h.current()
	if err != nil {
		return nil, err
	}
	// A fetch waits up to req.Wait by design; the call timeout comes on top.
	ctx, cancel := context.WithTimeout(ctx, h.in.cfg.CallTimeout+req.Wait)
	defer cancel()
	start := time.Now()
	resp, err := s.Fetch(ctx, req)
	h.in.observe("Fetch", start, err)
	return resp, err
}

func (h *sourceHandle) Commit(ctx context.Context, req *sdk.CommitRequest) (*sdk.CommitResponse, error) {
	s, err := h.current()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, h.in.cfg.CallTimeout)
	defer cancel()
	start := time.Now()
	resp, err := s.Commit(ctx, req)
	h.in.observe("Commit", start, err)
	return resp, err
}

func (h *sourceHandle) Republish(ctx context.Context, req *sdk.RepublishRequest) (*sdk.RepublishResponse, error) {
	s, err := h.current()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, h.in.cfg.CallTimeout)
	defer cancel()
	start := time.Now()
	resp, err := s.Republish(ctx, req)
	h.in.observe("Republish", start, err)
	return resp, err
}
