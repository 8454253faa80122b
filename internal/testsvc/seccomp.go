package testsvc

import (
	_ "embed"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

//go:embed seccomp_exec.py
var seccompExec []byte

// SyscallFilter is a systemd unit's system-call filter, expanded as systemd
// expands it: the first SystemCallFilter= line is an allow-list (systemd
// adds @default to it), and each later line removes (~) or adds its calls
// in order. ErrorNumber is SystemCallErrorNumber= ("" kills with SIGSYS).
type SyscallFilter struct {
	Allowed     map[string]bool
	ErrorNumber string
}

// UnitSyscallFilter reads the filter of a unit's text with systemd-analyze's
// own syscall groups.
func UnitSyscallFilter(t testing.TB, unit string) SyscallFilter {
	t.Helper()
	analyze := Tool(t, "systemd-analyze", "Debian package systemd; make test-deps installs it")
	f := SyscallFilter{Allowed: map[string]bool{}}
	first := true
	for _, line := range strings.Split(unit, "\n") {
		if v, ok := strings.CutPrefix(line, "SystemCallErrorNumber="); ok {
			f.ErrorNumber = strings.TrimSpace(v)
		}
		value, ok := strings.CutPrefix(line, "SystemCallFilter=")
		if !ok {
			continue
		}
		deny := strings.HasPrefix(value, "~")
		require.False(t, first && deny, "the filter starts with an allow-list")
		names := strings.Fields(strings.TrimPrefix(value, "~"))
		if first {
			names = append(names, "@default")
			first = false
		}
		for _, name := range names {
			for _, call := range syscallGroup(t, analyze, name, map[string]bool{}) {
				f.Allowed[call] = !deny
			}
		}
	}
	require.False(t, first, "the unit has a SystemCallFilter=")
	return f
}

// syscallGroup is the system calls of a systemd syscall group (@name) as
// systemd-analyze knows them, nested groups expanded, or name itself.
func syscallGroup(t testing.TB, analyze, name string, seen map[string]bool) []string {
	t.Helper()
	if !strings.HasPrefix(name, "@") {
		return []string{name}
	}
	if seen[name] {
		return nil
	}
	seen[name] = true
	out, err := exec.Command(analyze, "syscall-filter", "--no-pager", name).Output()
	require.NoError(t, err, "systemd-analyze syscall-filter %s", name)
	var calls []string
	for _, line := range strings.Split(string(out), "\n")[1:] {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		calls = append(calls, syscallGroup(t, analyze, line, seen)...)
	}
	return calls
}

// Wrap is the command prefix (DaemonOptions.Wrap) that runs a process under
// the filter, built with libseccomp as systemd builds it (Debian's
// python3-seccomp: its bindings to libseccomp).
func (f SyscallFilter) Wrap(t testing.TB) []string {
	t.Helper()
	python := "/usr/bin/python3"
	Need(t, exec.Command(python, "-c", "import seccomp").Run() == nil,
		"libseccomp's Python bindings are needed (Debian package python3-seccomp; make test-deps installs it)")
	var allowed []string
	for call, ok := range f.Allowed {
		if ok {
			allowed = append(allowed, call)
		}
	}
	sort.Strings(allowed)
	// The wrapped process may run as another user: it reads both files
	// (t.TempDir's parent is private).
	dir := ShortTempDir(t)
	require.NoError(t, os.Chmod(dir, 0o755))
	list := filepath.Join(dir, "allowed")
	require.NoError(t, os.WriteFile(list, []byte(strings.Join(allowed, "\n")+"\n"), 0o644))
	script := filepath.Join(dir, "seccomp_exec.py")
	require.NoError(t, os.WriteFile(script, seccompExec, 0o644))
	action := f.ErrorNumber
	if action == "" {
		action = "kill"
	}
	return []string{python, script, list, action, "--"}
}
