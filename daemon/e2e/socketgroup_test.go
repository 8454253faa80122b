package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// The packaged layout, as unprivileged users: the daemon runs as its own
// user with its own primary group and the admin group as a supplementary
// group (SupplementaryGroups= in the unit), so it can give the socket the
// admin group without CAP_CHOWN; the runtime directory is traversable; a
// member of the admin group can use the CLI, and anyone else is told which
// group to join. Here nobody (group daemon, supplementary nogroup) plays the
// daemon, nogroup the admin group, bin an operator and sys a stranger.
func TestSocketGroupWorksForUnprivilegedDaemonAndOperators(t *testing.T) {
	t.Parallel()
	testsvc.Need(t, os.Geteuid() == 0, "needs root to run the daemon and the CLI as other users")
	const daemonUID, daemonGID, adminGID = 65534, 1, 65534
	unit := systemdUnit(t)
	require.Contains(t, unit, "SupplementaryGroups=lifecycled-admin\n", "the unit makes the daemon a member of the admin group")
	runMode := unitMode(t, unit, "RuntimeDirectoryMode")
	dir := testsvc.ShortTempDir(t)
	run := filepath.Join(dir, "run")
	require.NoError(t, os.Mkdir(run, 0o700))
	require.NoError(t, os.Chmod(run, runMode), "the unit's RuntimeDirectoryMode")
	require.NoError(t, os.Chown(dir, daemonUID, daemonGID))
	require.NoError(t, os.Chmod(dir, 0o755))
	require.NoError(t, os.Chown(run, daemonUID, daemonGID))
	d := testsvc.NewDaemon(t, testsvc.DaemonOptions{Dir: dir, Socket: filepath.Join(run, "admin.sock"),
		Admin:      `socket_group = "nogroup"`,
		Credential: &syscall.Credential{Uid: daemonUID, Gid: daemonGID, Groups: []uint32{adminGID}}})
	require.NoError(t, os.Chown(d.ConfigPath, daemonUID, daemonGID))
	d.Start()
	d.WaitServing(60 * time.Second)

	fi, err := os.Stat(d.Socket)
	require.NoError(t, err)
	st := fi.Sys().(*syscall.Stat_t)
	require.EqualValues(t, adminGID, st.Gid, "the socket has the admin group")
	require.Equal(t, os.FileMode(0o660), fi.Mode().Perm())

	cli := func(uid, gid uint32, groups ...uint32) (string, int) {
		cmd := exec.Command(filepath.Join(d.Bin, "lifecycled"), "--addr", "unix://"+d.Socket, "status")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: groups}}
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
		return out.String(), code
	}
	out, code := cli(2, 2, adminGID)
	require.Equal(t, 0, code, "a member of the admin group uses the CLI: %s", out)
	out, code = cli(3, 3)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "permission denied")
	require.Contains(t, out, "usermod -aG nogroup", "the hint names the socket's group")
	require.NotContains(t, out, "-aG root")

	// The layout the old unit made: a 0750 runtime directory of the
	// daemon's own group stops admins before they reach the socket; the hint
	// says so instead of sending them to join a group they are in.
	require.NoError(t, os.Chmod(run, 0o750))
	out, code = cli(2, 2, adminGID)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "cannot enter the directory "+run)
	require.Contains(t, out, "RuntimeDirectoryMode=0755")
}

func systemdUnit(t *testing.T) string {
	data, err := os.ReadFile(filepath.Join(testsvc.RepoRoot(t), "deploy", "systemd", "lifecycled.service"))
	require.NoError(t, err)
	return string(data)
}

// unitMode reads an octal mode setting (RuntimeDirectoryMode=0755) of the unit.
func unitMode(t *testing.T, unit, key string) os.FileMode {
	for _, line := range strings.Split(unit, "\n") {
		if v, ok := strings.CutPrefix(line, key+"="); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			require.NoError(t, err, line)
			return os.FileMode(m)
		}
	}
	t.Fatalf("the unit has no %s", key)
	return 0
}
