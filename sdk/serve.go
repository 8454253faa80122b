package sdk

import (
	"os"
	"runtime"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// One plugin process serves one plugin, so the scrubber and logger are
// process-wide: secrets learnt in Configure are scrubbed from every later
// error and log line.
var (
	serverScrubber = &Scrubber{}
	serverLogger   = hclog.New(&hclog.LoggerOptions{
		Level:      hclog.Trace,
		Output:     serverScrubber.Writer(os.Stderr),
		JSONFormat: true, // the daemon parses it and re-emits under the plugin's name
	})
)

// Logger returns the plugin's logger: hclog JSON on stderr, scrubbed of
// secrets, shown in the daemon's log under the plugin's name.
func Logger() hclog.Logger { return serverLogger }

// AddSecret registers a value to scrub from errors and logs, for secrets a
// plugin obtains by itself (a token fetched at runtime).
func AddSecret(s string) { serverScrubber.Add(s) }

// ServeTenantDeleter serves impl; it is all a deleter plugin's main calls.
func ServeTenantDeleter(impl TenantDeleter) {
	serve(plugin.PluginSet{KindTenantDeleter: &TenantDeleterPlugin{Impl: impl}})
}

// ServeDLQSource serves impl; it is all a DLQ source plugin's main calls.
func ServeDLQSource(impl DLQSource) {
	serve(plugin.PluginSet{KindDLQSource: &DLQSourcePlugin{Impl: impl}})
}

func serve(ps plugin.PluginSet) {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{ProtocolVersion: ps},
		GRPCServer:       grpcServer,
		Logger:           serverLogger,
	})
}

// grpcServer is go-plugin's default server with a fixed pool of stream
// workers: handing a call to a waiting worker is cheaper than starting a
// goroutine per call, which matters for the many small Count calls.
// Fixed flow-control windows also turn off gRPC's bandwidth-delay probing,
// whose PING frames cost a wake-up on every small response.
func grpcServer(opts []grpc.ServerOption) *grpc.Server {
	return grpc.NewServer(append(opts,
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
		grpc.InitialWindowSize(windowSize),
		grpc.InitialConnWindowSize(windowSize),
	)...)
}

// windowSize is the fixed HTTP/2 window of plugin connections; large enough
// for a fetch batch of dead letters in flight.
const windowSize = 16 << 20

// DialOptions are the gRPC options the daemon should use for plugin
// connections, matching the plugin side (go-plugin ClientConfig.GRPCDialOptions).
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithInitialWindowSize(windowSize),
		grpc.WithInitialConnWindowSize(windowSize),
	}
}
