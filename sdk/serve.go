package sdk

import (
	"os"
	"runtime"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/lifecycled/lifecycled/sdk/internal/scrub"
	"github.com/lifecycled/lifecycled/sdk/internal/wire"
)

// One plugin process serves one plugin, so the scrubber and logger are
// process-wide: secrets learnt in Configure are scrubbed from every later
// error and log line.
var (
	serverScrubber = &scrub.Scrubber{}
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
// The deleter protocol did not change since protocol 1, so it is served on
// every version and a newer deleter still runs under an older daemon.
func ServeTenantDeleter(impl TenantDeleter) {
	ps := plugin.PluginSet{KindTenantDeleter: &deleterPlugin{impl: impl}}
	serve(map[int]plugin.PluginSet{1: ps, 2: ps, ProtocolVersion: ps})
}

// ServeDLQSource serves impl; it is all a DLQ source plugin's main calls.
// It speaks protocol 3 only: a daemon that knows only 2 would read its
// opaque positions as partition 0, offset 0, so such a daemon refuses to
// start it (go-plugin names both versions).
func ServeDLQSource(impl DLQSource) {
	serve(map[int]plugin.PluginSet{ProtocolVersion: {KindDLQSource: &sourcePlugin{impl: impl}}})
}

func serve(sets map[int]plugin.PluginSet) {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  wire.Handshake,
		VersionedPlugins: sets,
		GRPCServer:       grpcServer,
		Logger:           serverLogger,
	})
}

// grpcServer is go-plugin's default server with a fixed pool of stream
// workers: handing a call to a waiting worker is cheaper than starting a
// goroutine per call, which matters for the many small Count calls.
// Fixed flow-control windows also turn off gRPC's bandwidth-delay probing,
// whose PING frames cost a wake-up on every small response.
// The message limits are the daemon's (wire.MaxMessageBytesEnv), so that a
// batch the daemon sends fits and a response never exceeds what it
// receives.
func grpcServer(opts []grpc.ServerOption) *grpc.Server {
	limit := limitFromEnv()
	return grpc.NewServer(append(opts,
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
		grpc.InitialWindowSize(wire.WindowSize),
		grpc.InitialConnWindowSize(wire.WindowSize),
		grpc.MaxRecvMsgSize(limit),
		grpc.MaxSendMsgSize(limit),
	)...)
}
