package sdk

import (
	"github.com/hashicorp/go-hclog"

	"github.com/lifecycled/lifecycled/sdk/internal/scrub"
	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

// The round-trip tests (package sdk_test) hold the plugin's end of the
// protocol, served in-process from here, to the daemon's, sdk/host's
// clients, which package sdk cannot import.

func NewDeleterServer(impl TenantDeleter) pb.TenantDeleterServer {
	return &deleterServer{impl: impl, handlerBase: handlerBase{log: hclog.NewNullLogger(), scrub: &scrub.Scrubber{}}}
}

func NewSourceServer(impl DLQSource, limit int) pb.DLQSourceServer {
	return &sourceServer{impl: impl, limit: limit, handlerBase: handlerBase{log: hclog.NewNullLogger(), scrub: &scrub.Scrubber{}}}
}
