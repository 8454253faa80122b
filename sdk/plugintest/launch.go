// Package plugintest is the conformance kit for lifecycled plugins. A plugin
// author runs it from `go test` against the built plugin binary; every check
// crosses the real go-plugin gRPC boundary, exactly as the daemon calls the
// plugin, against the author's real store:
//
//	func TestConformance(t *testing.T) {
//		plugintest.RunTenantDeleter(t, plugintest.DeleterOptions{
//			Binary:  buildPlugin(t),
//			Fixture: &myFixture{...},  // seeds two tenants in the real store
//		})
//	}
//
// See docs/plugin-authoring.md.
package plugintest

import (
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/host"
)

// Process is a plugin process started the way the daemon starts it.
type Process struct {
	client *plugin.Client
	raw    any
	stderr *capture
}

// Launch starts the plugin binary with go-plugin (the protocols the daemon offers, gRPC, AutoMTLS,
// no inherited environment except env) and dispenses kind
// (sdk.KindTenantDeleter or sdk.KindDLQSource). It is stopped at cleanup.
func Launch(t testing.TB, binary, kind string, env ...string) *Process {
	t.Helper()
	out := &testWriter{t: t}
	t.Cleanup(out.close) // runs last: plugin output may arrive until the kill
	cmd := exec.Command(binary)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr := &capture{}
	client := plugin.NewClient(&plugin.ClientConfig{
		// Every line the plugin writes to stderr, JSON or not, as the
		// daemon receives it: the kit looks for secrets in it.
		Stderr:           stderr,
		HandshakeConfig:  host.Handshake,
		VersionedPlugins: host.PluginSets(0),
		GRPCDialOptions:  host.DialOptions(0),
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		SkipHostEnv:      true,
		StartTimeout:     30 * time.Second,
		Logger: hclog.New(&hclog.LoggerOptions{
			Name:   "plugin",
			Level:  hclog.Info,
			Output: out,
		}),
	})
	t.Cleanup(client.Kill)
	proto, err := client.Client()
	if err != nil {
		t.Fatalf("start plugin %s: %v", binary, err)
	}
	raw, err := proto.Dispense(kind)
	if err != nil {
		t.Fatalf("dispense %s from %s: %v", kind, binary, err)
	}
	return &Process{client: client, raw: raw, stderr: stderr}
}

// Stderr is everything the plugin wrote to its stderr so far, as the
// daemon receives it (hclog JSON lines and anything else).
func (p *Process) Stderr() string { return p.stderr.String() }

// capture collects a plugin's stderr.
type capture struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	return len(p), nil
}

func (c *capture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// Deleter returns the dispensed TenantDeleter.
func (p *Process) Deleter(t testing.TB) sdk.TenantDeleter {
	t.Helper()
	d, ok := p.raw.(sdk.TenantDeleter)
	if !ok {
		t.Fatalf("plugin dispensed %T, not a TenantDeleter", p.raw)
	}
	return d
}

// Source returns the dispensed DLQSource.
func (p *Process) Source(t testing.TB) sdk.DLQSource {
	t.Helper()
	s, ok := p.raw.(sdk.DLQSource)
	if !ok {
		t.Fatalf("plugin dispensed %T, not a DLQSource", p.raw)
	}
	return s
}

// Kill stops the plugin process (as a crash would, for redelivery checks).
func (p *Process) Kill() { p.client.Kill() }

// PID of the plugin process.
func (p *Process) PID() int {
	if rc := p.client.ReattachConfig(); rc != nil {
		return rc.Pid
	}
	return 0
}

// testWriter logs plugin output through the test until the test ends.
type testWriter struct {
	t      testing.TB
	mu     sync.Mutex
	closed bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

// needOption stops a check that an option left out has nothing to run on:
// under CI=true it fails (a skip there would pass a check that did not run),
// elsewhere it skips.
func needOption(t testing.TB, given bool, msg string) {
	t.Helper()
	if given {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: a check that cannot run fails instead of skipping)", msg)
		return
	}
	t.Skip(msg)
}
