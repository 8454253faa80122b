package pluginhost

import (
	"context"
	"errors"

	"github.com/lifecycled/lifecycled/sdk"
)

// errNoPlanner and errNoVerifier are the answers for a client that lacks
// the method (the gRPC client has them all; a test double may not).
var (
	errNoPlanner  = errors.New("this deleter's client cannot plan")
	errNoVerifier = errors.New("this deleter's client cannot verify")
)

// Plan implements sdk.Planner: like Count, one call with the call timeout.
// A plugin that cannot plan answers an Unsupported error, which callers
// tell apart from a failure.
func (h *deleterHandle) Plan(ctx context.Context, req *sdk.PlanRequest) (*sdk.PlanResponse, error) {
	return callOptional(ctx, h, "Plan", errNoPlanner, func(ctx context.Context, p sdk.Planner) (*sdk.PlanResponse, error) {
		return p.Plan(ctx, req)
	})
}

// Verify implements sdk.Verifier: like Count, one call with the call
// timeout. A plugin that cannot verify answers an Unsupported error, which
// callers tell apart from a failure.
func (h *deleterHandle) Verify(ctx context.Context, req *sdk.VerifyRequest) (*sdk.VerifyResponse, error) {
	return callOptional(ctx, h, "Verify", errNoVerifier, func(ctx context.Context, v sdk.Verifier) (*sdk.VerifyResponse, error) {
		return v.Verify(ctx, req)
	})
}

// callOptional is one call, with the call timeout, of a method of the
// optional interface I: a client without it answers as a plugin that
// cannot do it does, Unsupported (lacking says what it cannot do).
func callOptional[I, R any](ctx context.Context, h *deleterHandle, method string, lacking error, fn func(context.Context, I) (R, error)) (R, error) {
	return call(ctx, h.in, method, h.in.cfg.CallTimeout, h.client,
		func(ctx context.Context, d sdk.TenantDeleter) (R, error) {
			i, ok := d.(I)
			if !ok {
				var zero R
				return zero, sdk.Unsupported(lacking)
			}
			return fn(ctx, i)
		})
}

var (
	_ sdk.Planner  = (*deleterHandle)(nil)
	_ sdk.Verifier = (*deleterHandle)(nil)
)
