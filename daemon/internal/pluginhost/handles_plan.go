package pluginhost

import (
	"context"
	"errors"

	"github.com/lifecycled/lifecycled/sdk"
)

// errNoPlanner is the answer for a client that is not a Planner (the
// gRPC client always is; a test double may not be).
var errNoPlanner = errors.New("this deleter's client cannot plan")

// Plan implements sdk.Planner: like Count, one call with the call timeout.
// A plugin that cannot plan answers an Unsupported error, which callers
// tell apart from a failure.
func (h *deleterHandle) Plan(ctx context.Context, req *sdk.PlanRequest) (*sdk.PlanResponse, error) {
	return call(ctx, h.in, "Plan", h.in.cfg.CallTimeout, h.client,
		func(ctx context.Context, d sdk.TenantDeleter) (*sdk.PlanResponse, error) {
			p, ok := d.(sdk.Planner)
			if !ok {
				return nil, sdk.Unsupported(errNoPlanner)
			}
			return p.Plan(ctx, req)
		})
}

var _ sdk.Planner = (*deleterHandle)(nil)
