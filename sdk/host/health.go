package host

import (
	"context"

	"google.golang.org/grpc"

	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

// healthCall calls a service's Health. A plugin built before the Health RPC
// (or one in another language whose servicer leaves it out) answers
// UNIMPLEMENTED without our error detail: an Unsupported error
// (errors.Is(err, sdk.ErrUnsupported)) saying so, as does a Go plugin that
// is not an sdk.HealthChecker.
func healthCall(ctx context.Context, call func(context.Context, *pb.HealthRequest, ...grpc.CallOption) (*pb.HealthResponse, error)) error {
	if _, err := call(ctx, &pb.HealthRequest{}); err != nil {
		if notServed(err) {
			return unimplemented(err, "plugin does not implement Health (it answers UNIMPLEMENTED: built before the Health RPC, or written without it)")
		}
		return fromStatus(err)
	}
	return nil
}

// Health probes the deleter's store (sdk.HealthChecker).
func (c *deleterClient) Health(ctx context.Context) error { return healthCall(ctx, c.c.Health) }

// Health probes the source's broker or table (sdk.HealthChecker).
func (c *sourceClient) Health(ctx context.Context) error { return healthCall(ctx, c.c.Health) }
