package testsvc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Daemon is a lifecycled process started by a test.
type Daemon struct {
	t          testing.TB
	Bin        string // directory with lifecycled and the plugins
	Dir        string // config and state
	ConfigPath string
	Socket     string
	Env        []string
	wrap       []string
	cred       *syscall.Credential
	cmd        *exec.Cmd
	stderr     *SyncBuffer
	exited     chan struct{}
	exitErr    error
	http       *http.Client
}

// SyncBuffer is a goroutine-safe bytes.Buffer for process output.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// DaemonOptions shape the config of a test daemon.
type DaemonOptions struct {
	// State is daemon.state; default a SQLite file in the daemon's dir.
	State string
	// Extra is appended to the config (more tables, [[deleter]] blocks).
	Extra string
	// Daemon adds lines to the [daemon] table.
	Daemon string
	// Admin adds lines to the [admin] table.
	Admin string
	// Plugins adds lines to the [plugins] table.
	Plugins string
	// Socket overrides the socket path.
	Socket string
	// Dir reuses a directory (restart of a killed daemon with its state).
	Dir string
	// Env adds environment variables (NOTIFY_SOCKET, ...).
	Env []string
	// NoWait returns as soon as the process started, without waiting for
	// the socket.
	NoWait bool
	// Wrap runs the daemon under this command (e.g. prlimit --nofile=64:64 --).
	Wrap []string
	// Credential runs the daemon as another user (the test must be root).
	Credential *syscall.Credential
}

// NewDaemon writes a config and returns a daemon ready to Start.
func NewDaemon(t testing.TB, o DaemonOptions) *Daemon {
	t.Helper()
	bin := Binaries(t)
	dir := o.Dir
	if dir == "" {
		dir = ShortTempDir(t)
	}
	sock := o.Socket
	if sock == "" {
		sock = filepath.Join(dir, "admin.sock")
	}
	state := o.State
	if state == "" {
		state = "sqlite://" + filepath.Join(dir, "state.db")
	}
	cfg := fmt.Sprintf(`version = 1

[daemon]
state = %q
plugin_dir = %q
shutdown_timeout = "10s"
log_level = "debug"
%s

[admin]
listen = "unix://%s"
socket_mode = "0660"
%s

[plugins]
start_timeout = "20s"
restart_initial_delay = "200ms"
restart_max_delay = "2s"
shutdown_timeout = "3s"
%s

%s
`, state, bin, o.Daemon, sock, o.Admin, o.Plugins, o.Extra)
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{t: t, Bin: bin, Dir: dir, ConfigPath: path, Socket: sock, Env: o.Env, wrap: o.Wrap, cred: o.Credential}
	d.http = &http.Client{
		Timeout: 60 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dd net.Dialer
			return dd.DialContext(ctx, "unix", sock)
		}},
	}
	return d
}

// StartDaemon writes a config, starts the daemon and waits until /readyz
// answers (200 or 503).
func StartDaemon(t testing.TB, o DaemonOptions) *Daemon {
	t.Helper()
	d := NewDaemon(t, o)
	d.Start()
	if !o.NoWait {
		d.WaitServing(60 * time.Second)
	}
	return d
}

// Start starts the process (again, after a kill).
func (d *Daemon) Start() {
	d.t.Helper()
	args := append(append([]string(nil), d.wrap...), filepath.Join(d.Bin, "lifecycled"), "run", "--config", d.ConfigPath)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = d.Dir
	// As systemd's StateDirectory= does: a daemon with a PostgreSQL state
	// store keeps its generated receipt key there.
	cmd.Env = append(append(os.Environ(), "STATE_DIRECTORY="+d.Dir), d.Env...)
	d.stderr = &SyncBuffer{}
	cmd.Stderr = d.stderr
	cmd.Stdout = d.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: d.cred}
	if err := cmd.Start(); err != nil {
		d.t.Fatalf("start daemon: %v", err)
	}
	d.cmd = cmd
	d.exited = make(chan struct{})
	go func() {
		d.exitErr = cmd.Wait()
		close(d.exited)
	}()
	d.t.Cleanup(func() {
		if d.Running() {
			_ = cmd.Process.Kill()
			<-d.exited
		}
		if d.t.Failed() {
			d.t.Logf("daemon log (%s):\n%s", d.Dir, tail(d.stderr.String(), 150))
		}
	})
}

func tail(s string, lines int) string {
	parts := strings.Split(s, "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

// Running reports whether the process has not exited.
func (d *Daemon) Running() bool {
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// PID of the daemon process.
func (d *Daemon) PID() int { return d.cmd.Process.Pid }

// Logs returns everything the daemon wrote so far.
func (d *Daemon) Logs() string { return d.stderr.String() }

// WaitServing waits until the daemon serves HTTP on its socket: any answer
// to a request for its root will do. (This package cannot call the typed
// admin client's liveness route: the unit tests of the packages that client
// depends on use this one. The end-to-end tests check /healthz themselves,
// through daemon/e2e/apitest.)
func (d *Daemon) WaitServing(timeout time.Duration) {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if !d.Running() {
			d.t.Fatalf("daemon exited during start: %v\n%s", d.exitErr, tail(d.Logs(), 80))
		}
		if d.answers() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.t.Fatalf("daemon did not serve within %s\n%s", timeout, tail(d.Logs(), 80))
}

// answers reports whether the daemon answers a GET of its root on the
// socket, whatever the status (a redirect is not followed).
func (d *Daemon) answers() bool {
	req, err := http.NewRequest(http.MethodGet, "http://localhost/", nil)
	if err != nil {
		return false
	}
	resp, err := d.http.Transport.RoundTrip(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

// HTTP is the HTTP client that dials the daemon's socket. Tests call the
// admin API through daemon/adminclient on it (daemon/e2e/apitest); on its
// own it is for requests that are no call of the API: the console's pages,
// pprof, a route that does not exist, a forged Host.
func (d *Daemon) HTTP() *http.Client { return d.http }

// Signal sends sig to the daemon.
func (d *Daemon) Signal(sig os.Signal) {
	d.t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		d.t.Fatalf("signal daemon: %v", err)
	}
}

// Kill9 kills the daemon with SIGKILL and waits for it.
func (d *Daemon) Kill9() {
	d.t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
}

// Wait waits for the daemon to exit and returns its exit code (-1 if killed
// by a signal).
func (d *Daemon) Wait(timeout time.Duration) int {
	d.t.Helper()
	select {
	case <-d.exited:
	case <-time.After(timeout):
		d.t.Fatalf("daemon did not exit within %s\n%s", timeout, tail(d.Logs(), 80))
	}
	var ee *exec.ExitError
	if errors.As(d.exitErr, &ee) {
		return ee.ExitCode()
	}
	if d.exitErr != nil {
		return -1
	}
	return 0
}

// Signaled says which signal ended the daemon, once Wait returned.
func (d *Daemon) Signaled() (syscall.Signal, bool) {
	var ee *exec.ExitError
	if errors.As(d.exitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return ws.Signal(), true
		}
	}
	return 0, false
}

// CLI runs the lifecycled binary as a client of this daemon.
func (d *Daemon) CLI(args ...string) (stdout, stderr string, code int) {
	d.t.Helper()
	return d.CLIWithin(0, args...)
}

// CLIWithin is CLI for a command that must end within timeout (0: no
// limit): one still running then is killed and fails the test.
func (d *Daemon) CLIWithin(timeout time.Duration, args ...string) (stdout, stderr string, code int) {
	d.t.Helper()
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, filepath.Join(d.Bin, "lifecycled"), append([]string{"--addr", "unix://" + d.Socket}, args...)...)
	cmd.Dir = d.Dir
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ctx.Err() != nil {
		d.t.Fatalf("lifecycled %s did not end within %s; stdout: %s; stderr: %s", strings.Join(args, " "), timeout, o.String(), e.String())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		d.t.Fatalf("run cli: %v", err)
	}
	return o.String(), e.String(), code
}

// Eventually polls cond until it holds or timeout passes.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("condition not met within %s: "+format, append([]any{timeout}, args...)...)
}

// Restarted starts the daemon again with the same config and state (after
// Kill9 or a clean stop) and waits until it serves.
func (d *Daemon) Restarted(t testing.TB) *Daemon {
	t.Helper()
	d.Start()
	d.WaitServing(60 * time.Second)
	return d
}
