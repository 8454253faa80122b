// Package host is the daemon's end of the plugin protocol: the go-plugin
// plugin sets and gRPC options to start and dial a plugin with, and the
// clients that turn a plugin connection into an sdk.TenantDeleter or an
// sdk.DLQSource. It is for the daemon and the plugin kit (sdk/plugintest,
// and the benches that start plugins the same way), not for plugin
// authors: a plugin is written against package sdk alone.
package host

import (
	"context"
	"errors"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/internal/wire"
	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

// Handshake is the go-plugin handshake, the same on both ends. The cookie
// only stops a plugin from being run by hand by mistake; the checksum and
// AutoMTLS are the security.
var Handshake = wire.Handshake

// MaxMessageBytesEnv names the environment variable through which the daemon
// gives a plugin process the gRPC message limit it uses itself, so that both
// ends of the connection agree.
const MaxMessageBytesEnv = wire.MaxMessageBytesEnv

// DefaultMaxMessageBytes is the gRPC message limit of plugin connections when
// none is configured: 64 MiB. gRPC's own default (4 MiB received) is smaller
// than a page of 100 dead letters of 50 KB.
const DefaultMaxMessageBytes = wire.DefaultMaxMessageBytes

// MinMaxMessageBytes (4 MiB) and MaxMaxMessageBytes (1 GiB) bound the
// configurable limit: below gRPC's default nothing is gained, and gRPC sizes
// are int32.
const (
	MinMaxMessageBytes = wire.MinMaxMessageBytes
	MaxMaxMessageBytes = wire.MaxMaxMessageBytes
)

// PluginSets is what the daemon gives go-plugin: every protocol version it
// speaks, with a client for each plugin kind. maxMessageBytes is the gRPC
// message limit of the connections (0 for DefaultMaxMessageBytes); the
// daemon passes the same value to the plugin process in MaxMessageBytesEnv.
//
// Protocols 1 and 2 are accepted for deleters, whose protocol did not
// change. A DLQSource built for protocol 2 is read as protocol 2 meant it
// (see sourceClient); one that negotiated 1 must be refused by the caller
// (see sdk.MinSourceProtocolVersion), which can say so more clearly than
// go-plugin.
func PluginSets(maxMessageBytes int) map[int]plugin.PluginSet {
	set := func(version int) plugin.PluginSet {
		return plugin.PluginSet{
			sdk.KindTenantDeleter: &deleterPlugin{},
			sdk.KindDLQSource:     &sourcePlugin{maxMessageBytes: maxMessageBytes, version: version},
		}
	}
	sets := map[int]plugin.PluginSet{}
	for v := 1; v <= sdk.ProtocolVersion; v++ {
		sets[v] = set(v)
	}
	return sets
}

// DialOptions are the gRPC options the daemon should use for plugin
// connections, matching the plugin's end (go-plugin
// ClientConfig.GRPCDialOptions). maxMessageBytes is the message limit both
// ways (0 for DefaultMaxMessageBytes); give the plugin process the same
// value in MaxMessageBytesEnv.
func DialOptions(maxMessageBytes int) []grpc.DialOption {
	limit := wire.EffectiveLimit(maxMessageBytes)
	return []grpc.DialOption{
		grpc.WithInitialWindowSize(wire.WindowSize),
		grpc.WithInitialConnWindowSize(wire.WindowSize),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(limit), grpc.MaxCallSendMsgSize(limit)),
	}
}

// errPluginSide is what the daemon's glue answers when asked for the
// plugin's end: go-plugin puts both ends in one type, and the plugin's is
// package sdk's (sdk.ServeTenantDeleter, sdk.ServeDLQSource).
var errPluginSide = errors.New("the plugin's end of the plugin protocol is package sdk's Serve functions")

// deleterPlugin is the daemon's go-plugin glue for a TenantDeleter.
type deleterPlugin struct {
	plugin.NetRPCUnsupportedPlugin
}

func (*deleterPlugin) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error { return errPluginSide }

func (*deleterPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &deleterClient{c: pb.NewTenantDeleterClient(c)}, nil
}

// sourcePlugin is the daemon's go-plugin glue for a DLQSource.
type sourcePlugin struct {
	plugin.NetRPCUnsupportedPlugin
	// maxMessageBytes is the gRPC message limit of the daemon's end of the
	// connection (0 for DefaultMaxMessageBytes); the plugin's end reads its
	// own from MaxMessageBytesEnv.
	maxMessageBytes int
	// version is the protocol this set was negotiated under.
	version int
}

func (*sourcePlugin) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error { return errPluginSide }

func (p *sourcePlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &sourceClient{c: pb.NewDLQSourceClient(c), limit: wire.EffectiveLimit(p.maxMessageBytes), version: p.version}, nil
}
