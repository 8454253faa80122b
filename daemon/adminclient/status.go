package adminclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/lifecycled/lifecycled/daemon/internal/buildinfo"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

// Healthz is liveness: GET /healthz.
func (c *Client) Healthz(ctx context.Context, opts ...Option) (wire.Health, error) {
	var out wire.Health
	return out, c.send(ctx, call{method: http.MethodGet, path: pathHealthz, out: &out}, opts)
}

// Readyz is readiness, GET /readyz (?verbose lists each check). A daemon
// that is not ready answers 503 with its checks: they are in the answer
// beside the *Error.
func (c *Client) Readyz(ctx context.Context, verbose bool, opts ...Option) (wire.Health, error) {
	var q url.Values
	if verbose {
		q = url.Values{"verbose": {""}}
	}
	var out wire.Health
	opts = append(opts, func(o *options) { o.decodeFailure = true })
	return out, c.send(ctx, call{method: http.MethodGet, path: pathReadyz, query: q, out: &out}, opts)
}

// Metrics is GET /metrics, the Prometheus text exposition.
func (c *Client) Metrics(ctx context.Context, opts ...Option) (string, error) {
	var raw []byte
	err := c.send(ctx, call{method: http.MethodGet, path: pathMetrics}, append(opts, Raw(&raw)))
	return string(raw), err
}

// Version is GET /api/v1/version.
func (c *Client) Version(ctx context.Context, opts ...Option) (buildinfo.Info, error) {
	var out buildinfo.Info
	return out, c.send(ctx, call{method: http.MethodGet, path: pathVersion, out: &out}, opts)
}

// Status is GET /api/v1/status.
func (c *Client) Status(ctx context.Context, opts ...Option) (wire.Status, error) {
	var out wire.Status
	return out, c.send(ctx, call{method: http.MethodGet, path: pathStatus, out: &out}, opts)
}

// StatusProbe is GET /api/v1/status?probe: every plugin's store probed
// first.
func (c *Client) StatusProbe(ctx context.Context, opts ...Option) (wire.Status, error) {
	var out wire.Status
	return out, c.send(ctx, call{method: http.MethodGet, path: pathStatus, query: url.Values{"probe": {""}}, out: &out}, opts)
}

// Plugins is GET /api/v1/plugins.
func (c *Client) Plugins(ctx context.Context, opts ...Option) (wire.Plugins, error) {
	var out wire.Plugins
	return out, c.send(ctx, call{method: http.MethodGet, path: pathPlugins, out: &out}, opts)
}

// Reload is POST /api/v1/reload.
func (c *Client) Reload(ctx context.Context, opts ...Option) (wire.ReloadResult, error) {
	var out wire.ReloadResult
	return out, c.send(ctx, call{method: http.MethodPost, path: pathReload, out: &out}, opts)
}

// Archive is GET /api/v1/archive: the retention settings and recent passes.
func (c *Client) Archive(ctx context.Context, opts ...Option) (wire.ArchiveStatus, error) {
	var out wire.ArchiveStatus
	return out, c.send(ctx, call{method: http.MethodGet, path: pathArchive, out: &out}, opts)
}

// RunArchive is POST /api/v1/archive/run: one retention pass now, or what
// it would do.
func (c *Client) RunArchive(ctx context.Context, dryRun bool, opts ...Option) (wire.ArchiveRun, error) {
	var out wire.ArchiveRun
	return out, c.send(ctx, call{method: http.MethodPost, path: pathArchiveRun, query: dryRunQuery(dryRun), out: &out}, opts)
}
