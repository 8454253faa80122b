package adminclient

import (
	"context"
	"io"
	"net/http"
	"net/url"

	"github.com/lifecycled/lifecycled/daemon/wire"
)

// Counts is GET /api/v1/tenants/{tenant}/counts.
func (c *Client) Counts(ctx context.Context, tenant string, opts ...Option) (wire.Counts, error) {
	var out wire.Counts
	return out, c.send(ctx, call{method: http.MethodGet, path: tenantPath(tenant, "/counts"), out: &out}, opts)
}

// RequestDeletion is POST /api/v1/tenants/{tenant}/deletion: 202 with a
// new job, 200 with the tenant's active one. A nil req sends no body.
func (c *Client) RequestDeletion(ctx context.Context, tenant string, req *wire.DeletionRequest, opts ...Option) (wire.Job, error) {
	var out wire.Job
	k := call{method: http.MethodPost, path: tenantPath(tenant, "/deletion"), out: &out}
	if req != nil {
		k.body = req
	}
	return out, c.send(ctx, k, opts)
}

// Deletion is GET /api/v1/tenants/{tenant}/deletion: the tenant's latest job.
func (c *Client) Deletion(ctx context.Context, tenant string, opts ...Option) (wire.Job, error) {
	var out wire.Job
	return out, c.send(ctx, call{method: http.MethodGet, path: tenantPath(tenant, "/deletion"), out: &out}, opts)
}

// CancelDeletion is POST /api/v1/tenants/{tenant}/deletion/cancel.
func (c *Client) CancelDeletion(ctx context.Context, tenant string, opts ...Option) (wire.Job, error) {
	var out wire.Job
	return out, c.send(ctx, call{method: http.MethodPost, path: tenantPath(tenant, "/deletion/cancel"), out: &out}, opts)
}

// RetryDeletion is POST /api/v1/tenants/{tenant}/deletion/retry.
func (c *Client) RetryDeletion(ctx context.Context, tenant string, opts ...Option) (wire.Job, error) {
	var out wire.Job
	return out, c.send(ctx, call{method: http.MethodPost, path: tenantPath(tenant, "/deletion/retry"), out: &out}, opts)
}

// TenantDeletions is GET /api/v1/tenants/{tenant}/deletions: the tenant's
// jobs and ledger resurrections (query: cursor, limit, ...).
func (c *Client) TenantDeletions(ctx context.Context, tenant string, query url.Values, opts ...Option) (wire.TenantJobs, error) {
	var out wire.TenantJobs
	return out, c.send(ctx, call{method: http.MethodGet, path: tenantPath(tenant, "/deletions"), query: query, out: &out}, opts)
}

// Deletions is GET /api/v1/deletions (query: status, tenant, cursor, limit).
func (c *Client) Deletions(ctx context.Context, query url.Values, opts ...Option) (wire.JobPage, error) {
	var out wire.JobPage
	return out, c.send(ctx, call{method: http.MethodGet, path: pathDeletions, query: query, out: &out}, opts)
}

// RequestDeletions is POST /api/v1/deletions: many tenants in one request.
func (c *Client) RequestDeletions(ctx context.Context, req wire.BulkRequest, opts ...Option) (wire.BulkResult, error) {
	var out wire.BulkResult
	return out, c.send(ctx, call{method: http.MethodPost, path: pathDeletions, body: req, out: &out}, opts)
}

// Plan is GET /api/v1/tenants/{tenant}/plan.
func (c *Client) Plan(ctx context.Context, tenant string, opts ...Option) (wire.Plan, error) {
	var out wire.Plan
	return out, c.send(ctx, call{method: http.MethodGet, path: tenantPath(tenant, "/plan"), out: &out}, opts)
}

// Approve is POST /api/v1/tenants/{tenant}/deletion/approve.
func (c *Client) Approve(ctx context.Context, tenant string, req wire.ApproveRequest, opts ...Option) (wire.Job, error) {
	var out wire.Job
	return out, c.send(ctx, call{method: http.MethodPost, path: tenantPath(tenant, "/deletion/approve"), body: req, out: &out}, opts)
}

// Receipt is GET /api/v1/tenants/{tenant}/deletion/receipt: the signed
// receipt, byte for byte (its signature covers those bytes).
func (c *Client) Receipt(ctx context.Context, tenant string, opts ...Option) ([]byte, error) {
	var raw []byte
	err := c.send(ctx, call{method: http.MethodGet, path: tenantPath(tenant, "/deletion/receipt")}, append(opts, Raw(&raw)))
	return raw, err
}

// ReceiptKey is GET /api/v1/receipts/key: the public key that checks
// receipts and ledgers (keyID "" for the current one), as the JSON it came as.
func (c *Client) ReceiptKey(ctx context.Context, keyID string, opts ...Option) ([]byte, error) {
	var q url.Values
	if keyID != "" {
		q = url.Values{"key_id": {keyID}}
	}
	var raw []byte
	err := c.send(ctx, call{method: http.MethodGet, path: pathReceiptKey, query: q}, append(opts, Raw(&raw)))
	return raw, err
}

// Hold is PUT /api/v1/tenants/{tenant}/hold.
func (c *Client) Hold(ctx context.Context, tenant string, req wire.HoldRequest, opts ...Option) (wire.Hold, error) {
	var out wire.Hold
	return out, c.send(ctx, call{method: http.MethodPut, path: tenantPath(tenant, "/hold"), body: req, out: &out}, opts)
}

// Release is DELETE /api/v1/tenants/{tenant}/hold.
func (c *Client) Release(ctx context.Context, tenant string, opts ...Option) (wire.Hold, error) {
	var out wire.Hold
	return out, c.send(ctx, call{method: http.MethodDelete, path: tenantPath(tenant, "/hold"), out: &out}, opts)
}

// HoldOf is GET /api/v1/tenants/{tenant}/hold.
func (c *Client) HoldOf(ctx context.Context, tenant string, opts ...Option) (wire.Hold, error) {
	var out wire.Hold
	return out, c.send(ctx, call{method: http.MethodGet, path: tenantPath(tenant, "/hold"), out: &out}, opts)
}

// Holds is GET /api/v1/holds (query: all, cursor, limit).
func (c *Client) Holds(ctx context.Context, query url.Values, opts ...Option) (wire.Holds, error) {
	var out wire.Holds
	return out, c.send(ctx, call{method: http.MethodGet, path: pathHolds, query: query, out: &out}, opts)
}

// ExportLedger is GET /api/v1/erasures/ledger, streamed into w byte for
// byte (the file is signed).
func (c *Client) ExportLedger(ctx context.Context, w io.Writer, opts ...Option) error {
	return c.send(ctx, call{method: http.MethodGet, path: pathLedger, stream: w}, opts)
}

// ImportLedger is POST /api/v1/erasures/ledger with a signed ledger file
// sent as it is.
func (c *Client) ImportLedger(ctx context.Context, file []byte, opts ...Option) (wire.LedgerImport, error) {
	var out wire.LedgerImport
	return out, c.send(ctx, call{method: http.MethodPost, path: pathLedger, body: file, out: &out}, opts)
}

// Reverify is POST /api/v1/erasures/reverify.
func (c *Client) Reverify(ctx context.Context, opts ...Option) (wire.Reverify, error) {
	var out wire.Reverify
	return out, c.send(ctx, call{method: http.MethodPost, path: pathReverify, out: &out}, opts)
}
