package sdk

import (
	"context"
	"errors"

	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

// HealthChecker is implemented by a plugin (deleter or source) that can
// tell, cheaply, whether its store answers: a ping of the database, a
// metadata call to the broker. The daemon calls it on an interval and on
// demand, so that a store that went down shows in /readyz, `lifecycled
// status`, systemd's status line and lifecycled_plugin_store_up before an
// erasure or a retry fails on it.
//
// It is optional: the daemon reports the store of a plugin without it as
// "unknown", never as up.
type HealthChecker interface {
	// Health returns nil when the store answered, else why not (a
	// Retryable or Unavailable error, as a call that found the store down
	// would return). It must not modify anything, and should answer
	// within a few seconds: the daemon's context bounds it.
	Health(ctx context.Context) error
}

// errNoHealth is what the server answers for a plugin that does not
// implement HealthChecker.
var errNoHealth = errors.New("this plugin does not implement Health")

// serveHealth serves the Health RPC of impl for either service.
func serveHealth(ctx context.Context, h *handlerBase, impl any) (*pb.HealthResponse, error) {
	err := h.guard("Health", func() error {
		hc, ok := impl.(HealthChecker)
		if !ok {
			return Unsupported(errNoHealth)
		}
		return hc.Health(ctx)
	})
	if err != nil {
		return nil, err
	}
	return &pb.HealthResponse{}, nil
}

// Health serves the Health RPC: Unsupported when the deleter is not a
// HealthChecker.
func (s *deleterServer) Health(ctx context.Context, _ *pb.HealthRequest) (*pb.HealthResponse, error) {
	return serveHealth(ctx, &s.handlerBase, s.impl)
}

// Health serves the Health RPC: Unsupported when the source is not a
// HealthChecker.
func (s *sourceServer) Health(ctx context.Context, _ *pb.HealthRequest) (*pb.HealthResponse, error) {
	return serveHealth(ctx, &s.handlerBase, s.impl)
}
