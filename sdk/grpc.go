package sdk

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

// Handshake is the go-plugin handshake. The cookie only stops a plugin from
// being run by hand by mistake; the checksum and AutoMTLS are the security.
var Handshake = plugin.HandshakeConfig{
	MagicCookieKey:   "LIFECYCLED_PLUGIN",
	MagicCookieValue: "d6f1c2a7-lifecycled-plugin-v1",
}

// Plugin names in the go-plugin plugin set, one per kind.
const (
	KindTenantDeleter = "tenant_deleter"
	KindDLQSource     = "dlq_source"
)

// HostPluginSets is what the daemon gives go-plugin: every protocol version it
// speaks, with a client for each plugin kind. maxMessageBytes is the gRPC
// message limit of the connections (0 for DefaultMaxMessageBytes); the
// daemon passes the same value to the plugin process in MaxMessageBytesEnv.
//
// Protocol 1 is accepted for deleters, whose protocol did not change; a
// DLQSource that negotiated 1 must be refused by the caller (see
// MinSourceProtocolVersion), which can say so more clearly than go-plugin.
func HostPluginSets(maxMessageBytes int) map[int]plugin.PluginSet {
	set := func() plugin.PluginSet {
		return plugin.PluginSet{
			KindTenantDeleter: &TenantDeleterPlugin{},
			KindDLQSource:     &DLQSourcePlugin{MaxMessageBytes: maxMessageBytes},
		}
	}
	return map[int]plugin.PluginSet{1: set(), ProtocolVersion: set()}
}

// TenantDeleterPlugin is the go-plugin glue for TenantDeleter.
type TenantDeleterPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl TenantDeleter
}

// GRPCServer implements plugin.GRPCPlugin.
func (p *TenantDeleterPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterTenantDeleterServer(s, &deleterServer{impl: p.Impl, handlerBase: handlerBase{log: serverLogger, scrub: serverScrubber}})
	return nil
}

// GRPCClient implements plugin.GRPCPlugin.
func (p *TenantDeleterPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &deleterClient{c: pb.NewTenantDeleterClient(c)}, nil
}

// DLQSourcePlugin is the go-plugin glue for DLQSource.
type DLQSourcePlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl DLQSource
	// MaxMessageBytes is the gRPC message limit of the daemon's side of the
	// connection (0 for DefaultMaxMessageBytes); the plugin side reads its
	// own from MaxMessageBytesEnv.
	MaxMessageBytes int
}

// GRPCServer implements plugin.GRPCPlugin.
func (p *DLQSourcePlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterDLQSourceServer(s, &sourceServer{impl: p.Impl, limit: limitFromEnv(),
		handlerBase: handlerBase{log: serverLogger, scrub: serverScrubber}})
	return nil
}

// GRPCClient implements plugin.GRPCPlugin.
func (p *DLQSourcePlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &sourceClient{c: pb.NewDLQSourceClient(c), limit: effectiveLimit(p.MaxMessageBytes)}, nil
}
