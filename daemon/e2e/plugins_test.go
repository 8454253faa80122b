package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

type pluginList struct {
	Plugins []struct {
		Name     string `json:"name"`
		PID      int    `json:"pid"`
		State    string `json:"state"`
		Version  string `json:"version"`
		Restarts int    `json:"restarts"`
	} `json:"plugins"`
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func redisDeleter(addr string) string {
	return fmt.Sprintf(`
[[deleter]]
name = "redis:sessions"
plugin = "redis"
[deleter.config]
addr = %q
patterns = ["session:{tenant}:*"]
`, addr)
}

func TestNoPluginOutlivesTheDaemon(t *testing.T) {
	t.Parallel()
	r := testsvc.Redis(t)
	for _, how := range []string{"SIGTERM", "kill -9"} {
		t.Run(how, func(t *testing.T) {
			d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Extra: redisDeleter(r.Addr)})
			var pl pluginList
			testsvc.Eventually(t, 30*time.Second, func() bool {
				apitest.Expect(t, d, 200, &pl).Plugins(t.Context())
				return len(pl.Plugins) == 1 && pl.Plugins[0].State == "running"
			}, "plugin running")
			pid := pl.Plugins[0].PID
			require.True(t, alive(pid))
			if how == "SIGTERM" {
				d.Signal(syscall.SIGTERM)
				require.Equal(t, 0, d.Wait(30*time.Second))
			} else {
				d.Kill9()
			}
			testsvc.Eventually(t, 10*time.Second, func() bool { return !alive(pid) }, "plugin process %d gone after %s", pid, how)
		})
	}
}

func TestOperatorBuiltPluginShowsInPluginsList(t *testing.T) {
	t.Parallel()
	// The example plugin from docs/plugin-authoring.md, built and dropped in.
	dir := testsvc.ShortTempDir(t)
	bin := testsvc.BuildPackage(t, "./sdk/example/filestore", dir, "lifecycled-plugin-filestore")
	root := filepath.Join(dir, "uploads")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "t-550e8400-e29b-41d4-a716-446655440000"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "t-550e8400-e29b-41d4-a716-446655440000", "a.txt"), []byte("x"), 0o644))
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Extra: fmt.Sprintf(`
[[deleter]]
name = "files:uploads"
path = %q
[deleter.config]
root = %q
`, bin, root)})
	testsvc.Eventually(t, 30*time.Second, func() bool {
		out, _, code := d.CLI("plugins", "list")
		return code == 0 && containsAll(out, "files:uploads", "running", "0.1.0")
	}, "plugin listed as running")
	var counts map[string]any
	apitest.Expect(t, d, 200, &counts).Counts(t.Context(), "550e8400-e29b-41d4-a716-446655440000")
	require.Equal(t, map[string]any{"files:uploads": 1.0}, counts["counts"])
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !contains(s, sub) {
			return false
		}
	}
	return true
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
