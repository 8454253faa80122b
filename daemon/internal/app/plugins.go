package app

import (
	"path/filepath"

	"github.com/lifecycled/lifecycled/daemon/internal/config"
	"github.com/lifecycled/lifecycled/daemon/internal/pluginhost"
)

// PluginOptions is what the plugin host runs for cfg: every [[deleter]] and
// [[dlq_source]] block, deleters first, with the [plugins] defaults applied
// where a block sets no timeout of its own, and the binary's path resolved
// (plugin_dir/lifecycled-plugin-<plugin> unless the block names one).
func PluginOptions(cfg *config.Config) pluginhost.Options {
	var opts pluginhost.Options
	for _, ic := range cfg.Instances() {
		path, pluginDir := ic.Path, ""
		if path == "" {
			pluginDir = cfg.ResolvePath(cfg.Daemon.PluginDir)
			path = filepath.Join(pluginDir, "lifecycled-plugin-"+ic.Plugin)
		} else {
			path = cfg.ResolvePath(path)
		}
		pick := func(own, def config.Duration) config.Duration {
			if own.Duration > 0 {
				return own
			}
			return def
		}
		opts.Plugins = append(opts.Plugins, pluginhost.Plugin{
			Name:            ic.Name,
			Kind:            pluginhost.Kind(ic.Kind),
			Plugin:          ic.Plugin,
			Path:            path,
			PluginDir:       pluginDir,
			SHA256:          ic.SHA256,
			Config:          ic.PluginConfig(),
			StartTimeout:    pick(ic.StartTimeout, cfg.Plugins.StartTimeout).Duration,
			CallTimeout:     pick(ic.CallTimeout, cfg.Plugins.CallTimeout).Duration,
			DeleteTimeout:   pick(ic.DeleteTimeout, cfg.Plugins.DeleteTimeout).Duration,
			ShutdownTimeout: pick(ic.ShutdownTimeout, cfg.Plugins.ShutdownTimeout).Duration,
			RestartInitial:  cfg.Plugins.RestartInitialDelay.Duration,
			RestartMax:      cfg.Plugins.RestartMaxDelay.Duration,
			Env:             cfg.Plugins.Env,
			GOMAXPROCS:      cfg.Plugins.GOMAXPROCS,
			TenantIDFormat:  cfg.Daemon.TenantIDFormat,
			MaxMessageBytes: cfg.Plugins.MaxMessageBytes,
		})
	}
	return opts
}
