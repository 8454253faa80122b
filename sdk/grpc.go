package sdk

import (
	"context"
	"errors"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

// Plugin names in the go-plugin plugin set, one per kind: what a test
// passes to plugintest.Launch.
const (
	KindTenantDeleter = "tenant_deleter"
	KindDLQSource     = "dlq_source"
)

// errDaemonSide is what the plugin's glue answers when asked for the
// daemon's end: go-plugin puts both ends in one type, and the daemon's
// is sdk/host's.
var errDaemonSide = errors.New("the daemon's end of the plugin protocol is in sdk/host")

// deleterPlugin is the plugin's go-plugin glue for a TenantDeleter.
type deleterPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl TenantDeleter
}

func (p *deleterPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterTenantDeleterServer(s, &deleterServer{impl: p.impl, handlerBase: handlerBase{log: serverLogger, scrub: serverScrubber}})
	return nil
}

func (*deleterPlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errDaemonSide
}

// sourcePlugin is the plugin's go-plugin glue for a DLQSource.
type sourcePlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl DLQSource
}

func (p *sourcePlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterDLQSourceServer(s, &sourceServer{impl: p.impl, limit: limitFromEnv(),
		handlerBase: handlerBase{log: serverLogger, scrub: serverScrubber}})
	return nil
}

func (*sourcePlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errDaemonSide
}
