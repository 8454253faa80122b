package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// Issue 33 case 4, run for real: the shipped unit's system-call filter,
// built with libseccomp as systemd builds it, around the daemon in the
// packaged layout (its own user, the admin group as a supplementary group,
// socket_group set) and around the plugins it starts, which inherit it.
// The daemon serves, gives its socket the group, erases a tenant through a
// plugin and stops cleanly. The same daemon under the filter the unit had
// before (~@privileged without @chown, no SystemCallErrorNumber=) dies of
// SIGSYS: the harness sees the defect it guards against.
func TestDaemonRunsUnderTheUnitsSystemCallFilter(t *testing.T) {
	t.Parallel()
	testsvc.Need(t, os.Geteuid() == 0, "needs root to run the daemon as another user, as the unit does")
	const daemonUID, daemonGID, adminGID = 65534, 1, 65534
	unit := systemdUnit(t)
	r := testsvc.Redis(t)
	rc := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { rc.Close() })
	ctx := testsvc.Context(t, 2*time.Minute)
	const leaving, staying = "550e8400-e29b-41d4-a716-446655440000", "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
	for i := 0; i < 50; i++ {
		require.NoError(t, rc.Set(ctx, fmt.Sprintf("session:%s:%d", leaving, i), "s", 0).Err())
		require.NoError(t, rc.Set(ctx, fmt.Sprintf("session:%s:%d", staying, i), "s", 0).Err())
	}

	packaged := func(filter testsvc.SyscallFilter) *testsvc.Daemon {
		dir := testsvc.ShortTempDir(t)
		run := filepath.Join(dir, "run")
		require.NoError(t, os.Mkdir(run, unitMode(t, unit, "RuntimeDirectoryMode")))
		for _, p := range []string{dir, run} {
			require.NoError(t, os.Chown(p, daemonUID, daemonGID))
			require.NoError(t, os.Chmod(p, 0o755))
		}
		d := testsvc.NewDaemon(t, testsvc.DaemonOptions{Dir: dir, Socket: filepath.Join(run, "admin.sock"),
			Admin: `socket_group = "nogroup"`, Extra: redisDeleter(r.Addr), Wrap: filter.Wrap(t),
			Credential: &syscall.Credential{Uid: daemonUID, Gid: daemonGID, Groups: []uint32{adminGID}}})
		require.NoError(t, os.Chown(d.ConfigPath, daemonUID, daemonGID))
		return d
	}

	shipped := testsvc.UnitSyscallFilter(t, unit)
	d := packaged(shipped)
	d.Start()
	d.WaitServing(60 * time.Second)
	require.Equal(t, "2", seccompMode(t, d.PID()), "the daemon runs under a seccomp filter")
	fi, err := os.Stat(d.Socket)
	require.NoError(t, err)
	require.EqualValues(t, adminGID, fi.Sys().(*syscall.Stat_t).Gid, "the socket has the admin group")

	var pl pluginList
	testsvc.Eventually(t, 30*time.Second, func() bool {
		apitest.Expect(t, d, 200, &pl).Plugins(t.Context())
		return len(pl.Plugins) == 1 && pl.Plugins[0].State == "running"
	}, "the plugin runs")
	require.Equal(t, "2", seccompMode(t, pl.Plugins[0].PID), "the plugin inherits the filter")
	stdout, stderr, code := d.CLI("status")
	require.Equal(t, 0, code, "%s%s", stdout, stderr)

	startDeletion(t, d, leaving)
	waitJob(t, d, leaving, "COMPLETED", time.Minute)
	left, err := rc.Keys(ctx, "session:"+leaving+":*").Result()
	require.NoError(t, err)
	require.Empty(t, left, "the tenant is erased")
	kept, err := rc.Keys(ctx, "session:"+staying+":*").Result()
	require.NoError(t, err)
	require.Len(t, kept, 50, "the other tenant's keys stay")

	d.Signal(syscall.SIGTERM)
	require.Equal(t, 0, d.Wait(45*time.Second), "a clean stop under the filter:\n%s", d.Logs())
	require.NotContains(t, d.Logs(), "operation not permitted", "no call the daemon needs was denied")

	before := strings.Replace(unit, "SystemCallFilter=@chown\nSystemCallErrorNumber=EPERM\n", "", 1)
	require.NotEqual(t, unit, before, "the unit's fix is where this test expects it")
	old := packaged(testsvc.UnitSyscallFilter(t, before))
	old.Start()
	old.Wait(60 * time.Second)
	sig, ok := old.Signaled()
	require.True(t, ok && sig == syscall.SIGSYS, "the old filter kills the daemon with SIGSYS (got %v, %v):\n%s", sig, ok, old.Logs())
}

// seccompMode is the Seccomp: line of a process's status (2: a filter).
func seccompMode(t *testing.T, pid int) string {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "Seccomp:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no Seccomp: line in /proc/%d/status", pid)
	return ""
}
