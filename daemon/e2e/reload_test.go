package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// A reload whose new plugin config the plugin refuses keeps the working
// plugin (the new config is tried on a new instance first), says so in
// STATUS and a gauge, and `lifecycled reload` (the unit's ExecReload) fails.
func TestRefusedReloadKeepsTheRunningPlugin(t *testing.T) {
	t.Parallel()
	redis := testsvc.Redis(t)
	dir := testsvc.ShortTempDir(t)
	notify, next := notifyListener(t, dir)
	block := fmt.Sprintf("[[deleter]]\nname = \"redis:sessions\"\nplugin = \"redis\"\n[deleter.config]\naddr = %q\npatterns = [\"s:{tenant}:*\"]\n", redis.Addr)
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Dir: dir, Env: []string{"NOTIFY_SOCKET=" + notify}, Extra: block})
	next("READY=1")
	pid := func() float64 {
		var pl struct {
			Plugins []struct {
				State string  `json:"state"`
				PID   float64 `json:"pid"`
			} `json:"plugins"`
		}
		apitest.Expect(t, d, 200, &pl).Plugins(t.Context())
		require.Len(t, pl.Plugins, 1)
		require.Equal(t, "running", pl.Plugins[0].State)
		return pl.Plugins[0].PID
	}
	before := pid()

	good, err := os.ReadFile(d.ConfigPath)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(d.ConfigPath, []byte(strings.Replace(string(good), "patterns =", "paterns =", 1)), 0o600))
	out, errOut, code := d.CLI("reload")
	require.Equal(t, 2, code, "%s %s", out, errOut)
	require.Contains(t, errOut, "SYS_RELOAD_REFUSED")
	require.Contains(t, errOut, "paterns")
	require.Equal(t, before, pid(), "the running plugin was kept")
	_, _, code = d.CLI("tenant", "count", "550e8400-e29b-41d4-a716-446655440000")
	require.Equal(t, 0, code, "and it still counts")
	status := next("last reload refused")
	require.Contains(t, status, "paterns")
	require.Contains(t, metrics(t, d), "lifecycled_config_last_reload_successful 0")

	// SIGHUP takes the same path.
	d.Signal(syscall.SIGHUP)
	next("last reload refused")
	require.Equal(t, before, pid())

	require.NoError(t, os.WriteFile(d.ConfigPath, []byte(strings.Replace(string(good), `"s:{tenant}:*"`, `"s:{tenant}:*", "t:{tenant}:*"`, 1)), 0o600))
	out, errOut, code = d.CLI("--format", "json", "reload")
	require.Equal(t, 0, code, "%s %s", out, errOut)
	var body map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &body))
	require.Equal(t, true, body["reloaded"])
	require.NotEqual(t, before, pid(), "the changed plugin was replaced")
	require.Contains(t, metrics(t, d), "lifecycled_config_last_reload_successful 1")
}

// metrics is the daemon's GET /metrics, which must answer 200.
func metrics(t *testing.T, d *testsvc.Daemon) string {
	t.Helper()
	text, _ := apitest.Expect(t, d, 200, nil).Metrics(t.Context())
	return text
}
