package pluginhost_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/app"
	"github.com/lifecycled/lifecycled/daemon/internal/config"
	"github.com/lifecycled/lifecycled/daemon/internal/pluginhost"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// Reloads: Reconcile applies a new config to running plugins.

func TestReconcileAddsRemovesAndRestartsChangedPlugins(t *testing.T) {
	h, _ := newHost(t, "", basic+`
[[deleter]]
name = "test:b"
plugin = "misbehave"
`)
	pidA := status(t, h, "test:a").PID
	pidB := status(t, h, "test:b").PID
	cfg := parseConfig(t, filepath.Dir(misbehave(t)), "", `
[[deleter]]
name = "test:a"
plugin = "misbehave"
[deleter.config]
seed = { t1 = 42 }
[[deleter]]
name = "test:c"
plugin = "misbehave"
[deleter.config]
seed = { t1 = 1 }
`)
	h.Reconcile(testsvc.Context(t, time.Minute), app.PluginOptions(cfg))
	testsvc.Eventually(t, 30*time.Second, func() bool { return h.Check("test:c") == nil }, "test:c started")
	require.Equal(t, []string{"test:a", "test:c"}, h.DeleterNames())
	require.Equal(t, pidA, status(t, h, "test:a").PID, "unchanged plugin kept running")
	require.Error(t, syscall.Kill(pidB, 0), "removed plugin's process is gone")
}

// TestTenantIDFormatIsSentAndReloaded checks that every Configure carries
// [daemon] tenant_id_format, and that a reload that changes it configures
// the plugins again (they check ids and patterns against it).
func TestTenantIDFormatIsSentAndReloaded(t *testing.T) {
	t.Setenv("TESTPLUGIN_MODE", "format-version")
	parse := func(format string) *config.Config {
		return parseConfig(t, filepath.Dir(misbehave(t)), fmt.Sprintf("tenant_id_format = %q", format), basic)
	}
	h := pluginhost.New(app.PluginOptions(parse("uuid")), hclog.NewNullLogger(), prometheus.NewRegistry())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, h.Start(ctx))
	t.Cleanup(func() { _ = h.Stop(testsvc.Context(t, time.Minute)) })
	require.Equal(t, "format=uuid", status(t, h, "test:a").Version)
	pid := status(t, h, "test:a").PID

	h.Reconcile(ctx, app.PluginOptions(parse("uuid")))
	require.Equal(t, pid, status(t, h, "test:a").PID, "same format: the plugin keeps running")

	h.Reconcile(ctx, app.PluginOptions(parse(`^[a-z0-9-]{3,64}$`)))
	testsvc.Eventually(t, 30*time.Second, func() bool {
		return status(t, h, "test:a").Version == "format=^[a-z0-9-]{3,64}$"
	}, "the plugin was configured with the new tenant_id_format")
	require.NotEqual(t, pid, status(t, h, "test:a").PID)
}

// A reload notices a plugin binary replaced on disk since the plugin
// started (an upgraded package, a rebuilt plugin) and restarts that plugin
// from it, leaving the others running; with the binary unchanged, a reload
// restarts nothing.
func TestReloadRestartsAPluginWhoseBinaryChanged(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "lifecycled-plugin-misbehave")
	original, err := os.ReadFile(misbehave(t))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, original, 0o755))
	blocks := basic + "\n[[deleter]]\nname = \"test:b\"\nplugin = \"misbehave\"\n"
	h, _ := newHostIn(t, "", dir, blocks)
	opts := app.PluginOptions(parseConfig(t, dir, "", blocks))
	before := status(t, h, "test:a")

	require.NoError(t, h.Reconcile(testsvc.Context(t, time.Minute), opts))
	require.Equal(t, before.PID, status(t, h, "test:a").PID, "same binary: kept")

	// A new build of the plugin: another file put in place, as dpkg does.
	next := filepath.Join(dir, "next")
	require.NoError(t, os.WriteFile(next, append(original, []byte("rebuilt")...), 0o755))
	require.NoError(t, os.Rename(next, bin))
	require.NoError(t, h.Reconcile(testsvc.Context(t, time.Minute), opts))
	after := status(t, h, "test:a")
	require.Equal(t, pluginhost.StateRunning, after.State)
	require.NotEqual(t, before.PID, after.PID, "restarted from the new binary")
	require.NotEqual(t, before.SHA256, after.SHA256)
	require.Equal(t, pluginhost.StateRunning, status(t, h, "test:b").State)
}
