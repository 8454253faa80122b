package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/config"
	"github.com/lifecycled/lifecycled/daemon/internal/pluginhost"
)

func TestPluginOptionsApplyDefaultsAndResolvePaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sum := strings.Repeat("ab", 32)
	secret := filepath.Join(dir, "pw")
	require.NoError(t, os.WriteFile(secret, []byte("s3cr3t\n"), 0o600))
	text := `version = 1
[daemon]
plugin_dir = "plugins"
tenant_id_format = "uuid"
[plugins]
start_timeout = "5s"
call_timeout = "10s"
delete_timeout = "1h"
shutdown_timeout = "2s"
restart_initial_delay = "100ms"
restart_max_delay = "500ms"
env = ["AWS_REGION"]
gomaxprocs = 2
max_message_bytes = 8388608

[[dlq_source]]
name = "kafka:main"
plugin = "kafka"
call_timeout = "3s"
[dlq_source.config]
brokers = ["127.0.0.1:9092"]

[[deleter]]
name = "postgres:app"
plugin = "postgres"
path = "bin/my-postgres"
sha256 = "` + sum + `"
[deleter.config]
password_file = "` + secret + `"
`
	cfg, err := config.Parse(text, filepath.Join(dir, "config.toml"), os.LookupEnv)
	require.NoError(t, err)

	opts := PluginOptions(cfg)
	require.Len(t, opts.Plugins, 2)
	common := func(p pluginhost.Plugin) pluginhost.Plugin {
		p.StartTimeout, p.DeleteTimeout, p.ShutdownTimeout = 5*time.Second, time.Hour, 2*time.Second
		p.RestartInitial, p.RestartMax = 100*time.Millisecond, 500*time.Millisecond
		p.Env, p.GOMAXPROCS, p.TenantIDFormat, p.MaxMessageBytes = []string{"AWS_REGION"}, 2, "uuid", 8388608
		return p
	}
	require.Equal(t, common(pluginhost.Plugin{
		Name: "postgres:app", Kind: pluginhost.KindDeleter, Plugin: "postgres",
		Path: filepath.Join(dir, "bin/my-postgres"), SHA256: sum,
		Config:      map[string]any{"password": "s3cr3t"},
		CallTimeout: 10 * time.Second,
	}), opts.Plugins[0], "deleters first; a path of its own, relative to the config file; secrets resolved")
	require.Equal(t, common(pluginhost.Plugin{
		Name: "kafka:main", Kind: pluginhost.KindDLQSource, Plugin: "kafka",
		Path: filepath.Join(dir, "plugins", "lifecycled-plugin-kafka"), PluginDir: filepath.Join(dir, "plugins"),
		Config:      map[string]any{"brokers": []any{"127.0.0.1:9092"}},
		CallTimeout: 3 * time.Second,
	}), opts.Plugins[1], "the default binary in plugin_dir; the block's own timeout wins")
}

func TestPluginOptionsWithoutPlugins(t *testing.T) {
	t.Parallel()
	cfg := config.Defaults()
	require.Empty(t, PluginOptions(&cfg).Plugins)
}
