// Package buildinfo says which lifecycled this is. Version is set at build
// time (-ldflags "-X .../buildinfo.Version=v1.2.3"); the commit comes from the
// Go toolchain's VCS stamp when there is one.
package buildinfo

import (
	"runtime"
	"runtime/debug"

	"github.com/lifecycled/lifecycled/sdk"
)

// Version of this build; "dev" for local builds.
var Version = "dev"

// PluginProtocol is the newest plugin protocol version this daemon speaks.
const PluginProtocol = sdk.ProtocolVersion

// Info describes the running binary.
type Info struct {
	Version        string `json:"version"`
	Commit         string `json:"commit"`
	GoVersion      string `json:"go_version"`
	PluginProtocol int    `json:"plugin_protocol"`
}

// Get returns the build information.
func Get() Info {
	info := Info{Version: Version, Commit: "unknown", GoVersion: runtime.Version(), PluginProtocol: PluginProtocol}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				info.Commit = s.Value[:12]
			}
		}
	}
	return info
}
