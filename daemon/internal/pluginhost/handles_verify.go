package pluginhost

import (
	"context"
	"errors"

	"github.com/lifecycled/lifecycled/sdk"
)

// errNoVerifier is the answer for a client that is not a Verifier (the
// gRPC client always is; a test double may not be).
var errNoVerifier = errors.New("this deleter's client cannot verify")

// Verify implements sdk.Verifier: like Count, one call with the call
// timeout. A plugin that cannot verify answers an Unsupported error, which
// callers tell apart from a failure.
func (h *deleterHandle) Verify(ctx context.Context, req *sdk.VerifyRequest) (*sdk.VerifyResponse, error) {
	return call(ctx, h.in, "Verify", h.in.cfg.CallTimeout, h.client,
		func(ctx context.Context, d sdk.TenantDeleter) (*sdk.VerifyResponse, error) {
			v, ok := d.(sdk.Verifier)
			if !ok {
				return nil, sdk.Unsupported(errNoVerifier)
			}
			return v.Verify(ctx, req)
		})
}

var _ sdk.Verifier = (*deleterHandle)(nil)
