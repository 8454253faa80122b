// Package deploy holds the files operators install (systemd unit, example
// configs, Prometheus alert rules); its tests check them with the tools that
// consume them.
package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
)

func TestAlertRulesPassPromtool(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Fatal("promtool is needed (Debian package prometheus; make test-deps installs it)")
	}
	ctx := testsvc.Context(t, 2*time.Minute)
	out, err := exec.CommandContext(ctx, "promtool", "check", "rules", "prometheus/alerts.yml").CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.CommandContext(ctx, "promtool", "test", "rules", "prometheus/alerts_test.yml").CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// unitSettings are the unit's lines that the daemon and docs/operations.md
// rely on.
var unitSettings = []string{"Type=notify", "KillMode=mixed", "NoNewPrivileges=yes", "ProtectSystem=strict",
	"CapabilityBoundingSet=\n", "PrivateTmp=yes", "StateDirectory=lifecycled", "RuntimeDirectory=lifecycled",
	"RestartPreventExitStatus=78", "WatchdogSec=", "ExecReload=/usr/bin/lifecycled --addr unix:///run/lifecycled/admin.sock reload",
	"RemoveIPC=yes", "PrivateMounts=yes", "DevicePolicy=closed", "IPAddressDeny=any\n", "IPAddressAllow=localhost "}

func systemdUnit(t *testing.T) string {
	t.Helper()
	unit, err := os.ReadFile("systemd/lifecycled.service")
	require.NoError(t, err)
	return string(unit)
}

// TestSystemdUnitSettings needs no tool: it runs everywhere.
func TestSystemdUnitSettings(t *testing.T) {
	t.Parallel()
	text := systemdUnit(t)
	for _, want := range unitSettings {
		require.Contains(t, text, want)
	}
}

func TestSystemdUnitVerifies(t *testing.T) {
	t.Parallel()
	analyze := testsvc.Tool(t, "systemd-analyze", "Debian package systemd; make test-deps installs it")
	text := systemdUnit(t)
	// verify needs the ExecStart binary to exist; point it at a real build.
	bin := filepath.Join(testsvc.Binaries(t), "lifecycled")
	dir := t.TempDir()
	path := filepath.Join(dir, "lifecycled.service")
	require.NoError(t, os.WriteFile(path, []byte(strings.ReplaceAll(text, "/usr/bin/lifecycled", bin)), 0o644))
	ctx := testsvc.Context(t, 2*time.Minute)
	out, err := exec.CommandContext(ctx, analyze, "verify", path).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Empty(t, strings.TrimSpace(string(out)), "systemd-analyze verify warnings")
}

// The production example validates where the docs say to validate it: on
// the target machine before the unit runs, without systemd's credentials.
func TestExampleConfigValidatesWithoutSecrets(t *testing.T) {
	bin := filepath.Join(testsvc.Binaries(t), "lifecycled")
	cmd := exec.Command(bin, "config", "validate", "--without-secrets", "--config", "examples/config.toml")
	cmd.Env = append(os.Environ(), "CREDENTIALS_DIRECTORY=")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "valid (")
	require.Contains(t, string(out), "secret files not checked")
}

// Issue 33 case 4: the unit's SystemCallFilter denied @privileged, which
// holds fchownat, with no SystemCallErrorNumber: a daemon with
// socket_group set died of SIGSYS giving its socket the group. The unit's
// filter, expanded as systemd expands it (an allow-list, then removals and
// additions in order), must allow what the daemon does to create its
// socket, and a call it denies must fail with EPERM, not kill the daemon.
func TestSystemdUnitFilterAllowsTheSocketsGroup(t *testing.T) {
	t.Parallel()
	text := systemdUnit(t)
	require.Contains(t, text, "\nSystemCallErrorNumber=EPERM\n", "a denied call fails, it does not kill the daemon")
	f := testsvc.UnitSyscallFilter(t, text)
	require.Equal(t, "EPERM", f.ErrorNumber)
	for _, call := range []string{"fchownat", "fchown", "fchmodat", "bind", "listen", "renameat2", "unlinkat", "mkdirat"} {
		require.True(t, f.Allowed[call], "the unit's filter allows %s", call)
	}
	require.False(t, f.Allowed["reboot"], "and still denies the rest of @privileged")
}
