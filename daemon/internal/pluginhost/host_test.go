package pluginhost_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
	"github.com/lifecycled/lifecycled/sdk"
)

var (
	buildOnce sync.Once
	binPath   string
)

func misbehave(t *testing.T) string {
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "misbehave")
		require.NoError(t, err)
		binPath = testsvc.BuildPackage(t, "./internal/testplugins/misbehave", dir, "lifecycled-plugin-misbehave")
	})
	return binPath
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// newHost starts a host over the given [[deleter]] blocks; logs go to the
// returned buffer.
func newHost(t *testing.T, mode string, blocks string) (*pluginhost.Host, *syncBuf) {
	return newHostIn(t, mode, filepath.Dir(misbehave(t)), blocks)
}

// parseConfig is a config with the host tests' [plugins] settings; daemon
// adds lines to [daemon], blocks are the plugin blocks.
func parseConfig(t *testing.T, pluginDir, daemon, blocks string) *config.Config {
	text := fmt.Sprintf(`version = 1
[daemon]
plugin_dir = %q
%s
[plugins]
start_timeout = "5s"
call_timeout = "10s"
restart_initial_delay = "100ms"
restart_max_delay = "500ms"
shutdown_timeout = "2s"
env = ["TESTPLUGIN_MODE", "TESTPLUGIN_PIDFILE", "TESTPLUGIN_HEALTH"]
%s`, pluginDir, daemon, blocks)
	cfg, err := config.Parse(text, filepath.Join(t.TempDir(), "config.toml"), os.LookupEnv)
	require.NoError(t, err)
	return cfg
}

func newHostIn(t *testing.T, mode, pluginDir string, blocks string) (*pluginhost.Host, *syncBuf) {
	t.Setenv("TESTPLUGIN_MODE", mode)
	cfg := parseConfig(t, pluginDir, "", blocks)
	logs := &syncBuf{}
	log := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Trace, JSONFormat: true})
	h := pluginhost.New(app.PluginOptions(cfg), log, prometheus.NewRegistry())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, h.Start(ctx))
	t.Cleanup(func() { _ = h.Stop(testsvc.Context(t, time.Minute)) })
	return h, logs
}

const basic = `
[[deleter]]
name = "test:a"
plugin = "misbehave"
[deleter.config]
seed = { t1 = 42 }
`

func status(t *testing.T, h *pluginhost.Host, name string) pluginhost.Info {
	for _, i := range h.Status() {
		if i.Name == name {
			return i
		}
	}
	t.Fatalf("no plugin %s", name)
	return pluginhost.Info{}
}

func count(t *testing.T, h *pluginhost.Host, name, tenant string) (int64, error) {
	d, err := h.Deleter(name)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := d.Count(ctx, &sdk.CountRequest{TenantID: tenant})
	if err != nil {
		return 0, err
	}
	return resp.Count, nil
}

func TestStartCallAndStatus(t *testing.T) {
	h, _ := newHost(t, "", basic+`
[[deleter]]
name = "test:b"
plugin = "misbehave"
[deleter.config]
seed = { t1 = 7 }
`)
	n, err := count(t, h, "test:a", "t1")
	require.NoError(t, err)
	require.EqualValues(t, 42, n)
	n, err = count(t, h, "test:b", "t1")
	require.NoError(t, err)
	require.EqualValues(t, 7, n)

	info := status(t, h, "test:a")
	require.Equal(t, pluginhost.StateRunning, info.State)
	require.Equal(t, "test-1", info.Version)
	require.Equal(t, "deleter", info.Kind)
	require.Positive(t, info.PID)
	sum, err := pluginhost.FileSHA256(misbehave(t))
	require.NoError(t, err)
	require.Equal(t, sum, info.SHA256)
	require.NoError(t, h.Check("test:a"))
	require.Equal(t, []string{"test:a", "test:b"}, h.DeleterNames())
	_, err = h.Deleter("nope")
	require.ErrorIs(t, err, pluginhost.ErrUnknownPlugin)
	_, err = h.Source("test:a")
	require.ErrorIs(t, err, pluginhost.ErrUnknownPlugin, "a deleter is not a source")
}

func TestChecksum(t *testing.T) {
	sum, err := pluginhost.FileSHA256(misbehave(t))
	require.NoError(t, err)
	wrong := strings.Repeat("0", 64)
	h, _ := newHost(t, "", fmt.Sprintf(`
[[deleter]]
name = "good"
plugin = "misbehave"
sha256 = %q
[[deleter]]
name = "tampered"
plugin = "misbehave"
sha256 = %q
`, sum, wrong))
	require.NoError(t, h.Check("good"))
	err = h.Check("tampered")
	require.Error(t, err)
	require.Contains(t, err.Error(), "checksum mismatch")
	require.Contains(t, err.Error(), wrong, "names the configured sum")
	require.Contains(t, err.Error(), sum, "names the file's sum")
	info := status(t, h, "tampered")
	require.NotEqual(t, pluginhost.StateRunning, info.State, "retried with backoff, never running")
	require.Contains(t, info.LastError, "checksum mismatch")
	require.Zero(t, info.PID, "never started")
	_, err = count(t, h, "tampered", "t1")
	require.Error(t, err)
	require.Equal(t, sdk.ClassRetryable, sdk.ClassOf(err))
}

func TestStartTimeout(t *testing.T) {
	start := time.Now()
	h, _ := newHost(t, "slow-start", basic)
	require.Less(t, time.Since(start), 20*time.Second, "start gave up at start_timeout")
	err := h.Check("test:a")
	require.Error(t, err)
	require.Contains(t, err.Error(), "timeout")
}

// A plugin that starts a helper process inheriting its stdout and stderr
// and forgets it must neither wedge the start or stop of the daemon nor
// leave the helper running.
func TestAPluginsForgottenChildNeitherWedgesNorSurvives(t *testing.T) {
	for _, mode := range []string{"fork-child-exit", "fork-child"} {
		t.Run(mode, func(t *testing.T) {
			pidfile := filepath.Join(t.TempDir(), "child.pid")
			t.Setenv("TESTPLUGIN_PIDFILE", pidfile)
			start := time.Now()
			h, _ := newHost(t, mode, basic)
			require.Less(t, time.Since(start), 15*time.Second, "start waits at most start_timeout (5s) and a grace period")
			if mode == "fork-child-exit" {
				err := h.Check("test:a")
				require.Error(t, err)
				require.Contains(t, err.Error(), "lifecycled-plugin-misbehave", "the error names the plugin")
			} else {
				require.NoError(t, h.Check("test:a"))
			}
			stopping := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			require.NoError(t, h.Stop(ctx))
			require.Less(t, time.Since(stopping), 10*time.Second, "stop waits at most shutdown_timeout (2s) and a grace period")
			data, err := os.ReadFile(pidfile)
			require.NoError(t, err)
			for _, line := range strings.Fields(string(data)) {
				pid, err := strconv.Atoi(line)
				require.NoError(t, err)
				testsvc.Eventually(t, 10*time.Second, func() bool { return !alive(pid) }, "the plugin's child %d is killed with it", pid)
			}
		})
	}
}

// alive reports whether pid runs (a zombie waiting to be reaped does not).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// copyPlugin puts a copy of the test plugin in a fresh directory (mode
// 0755) and returns the directory.
func copyPlugin(t *testing.T, mode os.FileMode) string {
	dir := filepath.Join(testsvc.ShortTempDir(t), "plugins")
	require.NoError(t, os.Mkdir(dir, 0o755))
	data, err := os.ReadFile(misbehave(t))
	require.NoError(t, err)
	path := filepath.Join(dir, "lifecycled-plugin-misbehave")
	require.NoError(t, os.WriteFile(path, data, 0o755))
	require.NoError(t, os.Chmod(path, mode))
	return dir
}

// A plugin binary anyone could have replaced is not run (sshd's StrictModes
// for plugins): world-writable, in a world-writable directory, or reached
// through a symlink out of plugin_dir.
func TestUnsafePluginBinariesAreRefused(t *testing.T) {
	t.Run("world-writable binary", func(t *testing.T) {
		h, _ := newHostIn(t, "", copyPlugin(t, 0o777), basic)
		err := h.Check("test:a")
		require.Error(t, err)
		require.Contains(t, err.Error(), "writable by anyone")
	})
	t.Run("world-writable directory", func(t *testing.T) {
		dir := copyPlugin(t, 0o755)
		require.NoError(t, os.Chmod(dir, 0o777))
		h, _ := newHostIn(t, "", dir, basic)
		err := h.Check("test:a")
		require.Error(t, err)
		require.Contains(t, err.Error(), dir)
		require.Contains(t, err.Error(), "writable by anyone")
	})
	t.Run("symlink out of plugin_dir", func(t *testing.T) {
		outside := copyPlugin(t, 0o755)
		dir := filepath.Join(testsvc.ShortTempDir(t), "plugins")
		require.NoError(t, os.Mkdir(dir, 0o755))
		require.NoError(t, os.Symlink(filepath.Join(outside, "lifecycled-plugin-misbehave"), filepath.Join(dir, "lifecycled-plugin-misbehave")))
		h, _ := newHostIn(t, "", dir, basic)
		err := h.Check("test:a")
		require.Error(t, err)
		require.Contains(t, err.Error(), "outside plugin_dir")
	})
	t.Run("sticky world-writable parent runs", func(t *testing.T) {
		// /tmp is 1777: safe, others cannot replace what they do not own.
		h, _ := newHostIn(t, "", copyPlugin(t, 0o755), basic)
		require.NoError(t, h.Check("test:a"))
	})
	// Issue 33 case 6: a binary writable by its group ran, with a warning;
	// anyone in the group could replace it and run with every secret.
	t.Run("group-writable binary", func(t *testing.T) {
		dir := copyPlugin(t, 0o775)
		h, _ := newHostIn(t, "", dir, basic)
		err := h.Check("test:a")
		require.Error(t, err)
		require.Contains(t, err.Error(), "writable by its group")
		require.Contains(t, err.Error(), "refusing to run it")
	})
}

func TestProtocolMismatchNamesBothVersions(t *testing.T) {
	h, _ := newHost(t, "protocol-4", basic)
	err := h.Check("test:a")
	require.Error(t, err)
	require.Contains(t, err.Error(), "speaks protocol 4")
	require.Contains(t, err.Error(), "[1 2 3]")
	require.Contains(t, err.Error(), "upgrade lifecycled")
}

// Protocol 1 carried header keys as strings and had no batch
// acknowledgement: a source speaking it could lose dead letters.
func TestDLQSourceOnProtocol1IsRefusedClearly(t *testing.T) {
	h, _ := newHost(t, "source-protocol-1", `
[[dlq_source]]
name = "old"
plugin = "misbehave"
`)
	err := h.Check("old")
	require.Error(t, err)
	require.Contains(t, err.Error(), "speaks plugin protocol 1")
	require.Contains(t, err.Error(), "protocol 2")
	require.Contains(t, err.Error(), "rebuild")
}

func TestInvalidPluginConfigIsReported(t *testing.T) {
	h, _ := newHost(t, "bad-config", basic)
	err := h.Check("test:a")
	require.Error(t, err)
	require.Contains(t, err.Error(), "dsn: required")
}

func TestKill9MidCallRestartsPlugin(t *testing.T) {
	h, logs := newHost(t, "", basic)
	before := status(t, h, "test:a")
	d, err := h.Deleter("test:a")
	require.NoError(t, err)
	progressed := make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		_, err := d.Delete(testsvc.Context(t, time.Minute), &sdk.DeleteRequest{TenantID: "t1"}, func(int64) { once.Do(func() { close(progressed) }) })
		done <- err
	}()
	<-progressed
	require.NoError(t, syscall.Kill(before.PID, syscall.SIGKILL))
	err = <-done
	require.Error(t, err)
	require.Equal(t, sdk.ClassRetryable, sdk.ClassOf(err), "a crashed plugin's call is retryable: %v", err)
	deleted, ok := sdk.DeletedBefore(err)
	require.True(t, ok, "the last progress is kept")
	require.Positive(t, deleted)

	testsvc.Eventually(t, 30*time.Second, func() bool {
		i := status(t, h, "test:a")
		return i.State == pluginhost.StateRunning && i.Restarts >= 1 && i.PID != before.PID
	}, "plugin restarted")
	n, err := count(t, h, "test:a", "t1")
	require.NoError(t, err, "the next call succeeds")
	require.EqualValues(t, 42, n, "a restarted plugin is configured again")
	require.Contains(t, logs.String(), "plugin stopped unexpectedly")
}

func TestPanicInHandlerDoesNotKillThePlugin(t *testing.T) {
	h, _ := newHost(t, "panic-count", basic)
	pid := status(t, h, "test:a").PID
	_, err := count(t, h, "test:a", "t1")
	require.Error(t, err)
	require.Contains(t, err.Error(), "plugin panicked in Count")
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err))
	time.Sleep(500 * time.Millisecond)
	info := status(t, h, "test:a")
	require.Equal(t, pluginhost.StateRunning, info.State)
	require.Equal(t, pid, info.PID)
	require.Zero(t, info.Restarts)
}

func TestCrashOutsideAHandlerIsRestartedWithStderrKept(t *testing.T) {
	h, _ := newHost(t, "crash-count", basic)
	_, err := count(t, h, "test:a", "t1")
	require.Error(t, err)
	require.Equal(t, sdk.ClassRetryable, sdk.ClassOf(err), "%v", err)
	testsvc.Eventually(t, 30*time.Second, func() bool { return status(t, h, "test:a").Restarts >= 1 }, "restart counted")
	info := status(t, h, "test:a")
	require.Contains(t, strings.Join(info.StderrTail, "\n"), "a goroutine panicked outside any handler")
}

func TestSecretsNeverReachLogsOrErrors(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "pw")
	require.NoError(t, os.WriteFile(secretFile, []byte("s3cr3t-pa55word\n"), 0o600))
	h, logs := newHost(t, "leak-secret", fmt.Sprintf(`
[[deleter]]
name = "test:a"
plugin = "misbehave"
[deleter.config]
password_file = %q
`, secretFile))
	err := h.Check("test:a")
	require.Error(t, err)
	require.Contains(t, err.Error(), "login failed")
	info := status(t, h, "test:a")
	for _, text := range []string{err.Error(), info.LastError, strings.Join(info.StderrTail, "\n"), logs.String()} {
		require.NotContains(t, text, "s3cr3t-pa55word")
	}
	require.Contains(t, logs.String(), "cannot log in with password REDACTED", "the plugin's log line arrives, scrubbed")
}

func TestHostEnvironmentIsNotInherited(t *testing.T) {
	t.Setenv("LIFECYCLED_TEST_HOST_SECRET", "do-not-pass")
	h, _ := newHost(t, "env-version", basic)
	v := status(t, h, "test:a").Version
	require.Contains(t, v, "TESTPLUGIN_MODE", "allow-listed variables pass")
	require.NotContains(t, v, "LIFECYCLED_TEST_HOST_SECRET")
	require.NotContains(t, v, "PATH")
	require.Contains(t, v, "GOMAXPROCS", "plugins run with [plugins] gomaxprocs")
}

func TestStopLeavesNoProcess(t *testing.T) {
	h, _ := newHost(t, "", basic)
	pid := status(t, h, "test:a").PID
	require.NoError(t, h.Stop(testsvc.Context(t, time.Minute)))
	require.Error(t, syscall.Kill(pid, 0), "plugin process ended")
	require.Equal(t, pluginhost.StateStopped, status(t, h, "test:a").State)
}
