package pluginhost

import "time"

// Kind names what a plugin does for the daemon.
type Kind string

// Plugin kinds.
const (
	KindDeleter   Kind = "deleter"
	KindDLQSource Kind = "dlq_source"
)

// Options are the plugins a host runs, in config order. The app builds them
// from the config: the host knows nothing of TOML, defaults or paths
// relative to the config file.
type Options struct {
	Plugins []Plugin
}

// Plugin is one plugin process: a [[deleter]] or [[dlq_source]] block with
// the daemon-wide defaults applied.
type Plugin struct {
	Name   string
	Kind   Kind
	Plugin string // the plugin's short name, for status
	// Path is the binary. PluginDir is set when Path is the default one
	// inside plugin_dir, so that a symlink out of it can be refused.
	Path      string
	PluginDir string
	SHA256    string // "" skips the check
	// Config is sent on every Configure, with its secrets resolved.
	Config          map[string]any
	StartTimeout    time.Duration
	CallTimeout     time.Duration
	DeleteTimeout   time.Duration
	ShutdownTimeout time.Duration
	RestartInitial  time.Duration
	RestartMax      time.Duration
	Env             []string // names of the daemon's variables passed on
	GOMAXPROCS      int
	// TenantIDFormat is [daemon] tenant_id_format, sent on every Configure
	// so that a plugin can check ids and refuse config that could confuse
	// one tenant's data with another's.
	TenantIDFormat string
	// MaxMessageBytes is the gRPC message limit, the same on both ends.
	MaxMessageBytes int
}
