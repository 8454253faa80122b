package sdk

import (
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
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
		GRPCServer:       plugin.DefaultGRPCServer,
		Logger:           serverLogger,
	})
}
