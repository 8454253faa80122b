package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// `config validate` starts each plugin and lets it check its config (by
// default; --no-plugins checks the file alone): a typo in a plugin's block,
// a missing binary and a wrong checksum are caught before the daemon runs,
// each named once ("failed: ...", not "FAILED: failed: ...").
func TestConfigValidateWithPlugins(t *testing.T) {
	t.Parallel()
	redis := testsvc.Redis(t)
	dir := testsvc.ShortTempDir(t)
	good := fmt.Sprintf("[[deleter]]\nname = \"redis:sessions\"\nplugin = \"redis\"\n[deleter.config]\naddr = %q\npatterns = [\"s:{tenant}:*\"]\n", redis.Addr)
	d := testsvc.NewDaemon(t, testsvc.DaemonOptions{Dir: dir, Extra: good +
		fmt.Sprintf("[[deleter]]\nname = \"redis:typo\"\nplugin = \"redis\"\n[deleter.config]\naddr = %q\npaterns = [\"s:{tenant}:*\"]\n", redis.Addr) +
		"[[deleter]]\nname = \"nosuch\"\nplugin = \"nosuch\"\n[deleter.config]\n" +
		"[[deleter]]\nname = \"redis:pinned\"\nplugin = \"redis\"\nsha256 = \"" + fmt.Sprintf("%064d", 0) + "\"\n[deleter.config]\naddr = \"x:1\"\npatterns = [\"s:{tenant}\"]\n"})

	out, errOut, code := runCLI(t, dir, "config", "validate", "--no-plugins", "--config", d.ConfigPath)
	require.Equal(t, 0, code, "with --no-plugins only the daemon's part is checked: %s %s", out, errOut)
	require.Contains(t, out, "plugins not started (--no-plugins)")

	for _, args := range [][]string{{"config", "validate", d.ConfigPath}, {"config", "validate", "--plugins", "--config", d.ConfigPath}} {
		out, errOut, code = runCLI(t, dir, args...)
		require.Equal(t, 1, code, "%v: %s\n%s", args, out, errOut)
		require.Contains(t, out, "plugin redis:sessions (redis): ok")
		require.Contains(t, out, "plugin redis:typo (redis): failed: ")
		require.Contains(t, out, "paterns")
		require.Contains(t, out, "plugin nosuch (nosuch): failed: ")
		require.Contains(t, out, "not found")
		require.Contains(t, out, "plugin redis:pinned (redis): failed: ")
		require.Contains(t, out, "checksum mismatch")
		require.NotRegexp(t, `(?i)failed: failed`, out, "no doubled words")
		require.Contains(t, errOut, "3 plugins failed: redis:typo, nosuch, redis:pinned")
	}
}

// A daemon whose plugin cannot start is ready (the others serve) but says
// it is degraded, naming the plugin, in systemd's STATUS and in /readyz.
func TestBrokenPluginMakesTheDaemonDegradedAndSaysWhich(t *testing.T) {
	t.Parallel()
	dir := testsvc.ShortTempDir(t)
	notify, next := notifyListener(t, dir)
	port := testsvc.FreePort(t)
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Dir: dir, Env: []string{"NOTIFY_SOCKET=" + notify},
		Extra: fmt.Sprintf("[[deleter]]\nname = \"redis:sessions\"\nplugin = \"redis\"\n[deleter.config]\naddr = \"127.0.0.1:%d\"\npatterns = [\"s:{tenant}:*\"]\n", port)})
	ready := next("READY=1")
	require.Contains(t, ready, "STATUS=degraded; 0/1 plugins running; redis:sessions: ")
	require.Contains(t, ready, "connection refused")
	var a apitest.Answer
	apitest.Record(d, &a).Readyz(t.Context(), true)
	require.Equal(t, 503, a.Code, "%s", a.Body)
	require.Contains(t, string(a.Body), "redis:sessions")
	_, err := os.Stat(filepath.Join(dir, "admin.sock"))
	require.NoError(t, err)
}
