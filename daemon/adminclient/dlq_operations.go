package adminclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/lifecycled/lifecycled/daemon/wire"
)

// StartOperation is POST /api/v1/dlq/operations: a bulk action, started
// (202). req.DryRun must be false; PreviewOperation answers a dry run.
func (c *Client) StartOperation(ctx context.Context, req wire.OperationRequest, opts ...Option) (wire.Operation, error) {
	var out wire.Operation
	return out, c.send(ctx, call{method: http.MethodPost, path: pathOperations, body: req, out: &out}, opts)
}

// PreviewOperation is POST /api/v1/dlq/operations with dry_run: what the
// action would touch, changing nothing.
func (c *Client) PreviewOperation(ctx context.Context, req wire.OperationRequest, opts ...Option) (wire.OperationDryRun, error) {
	req.DryRun = true
	var out wire.OperationDryRun
	return out, c.send(ctx, call{method: http.MethodPost, path: pathOperations, body: req, out: &out}, opts)
}

// Operations is GET /api/v1/dlq/operations (query: state, cursor, limit).
func (c *Client) Operations(ctx context.Context, query url.Values, opts ...Option) (wire.Operations, error) {
	var out wire.Operations
	return out, c.send(ctx, call{method: http.MethodGet, path: pathOperations, query: query, out: &out}, opts)
}

// Operation is GET /api/v1/dlq/operations/{id}.
func (c *Client) Operation(ctx context.Context, id string, opts ...Option) (wire.Operation, error) {
	var out wire.Operation
	return out, c.send(ctx, call{method: http.MethodGet, path: operationPath(id, ""), out: &out}, opts)
}

// CancelOperation is POST /api/v1/dlq/operations/{id}/cancel.
func (c *Client) CancelOperation(ctx context.Context, id string, opts ...Option) (wire.Operation, error) {
	var out wire.Operation
	return out, c.send(ctx, call{method: http.MethodPost, path: operationPath(id, "/cancel"), out: &out}, opts)
}
