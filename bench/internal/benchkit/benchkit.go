// Package benchkit is shared by the benchmark programs under bench/cmd:
// launching a plugin the way the daemon does, throwaway PostgreSQL
// databases, the daemon on a config of the benchmark's, producing to Kafka,
// timing, percentiles, process memory, and the report format. Benchmarks always run their baseline in the
// same run and report ratios.
package benchkit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/host"
)

// Root is the repository root.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// Bin is ./bin, where `make build` puts the binaries.
func Bin() string { return filepath.Join(Root(), "bin") }

// Socket is an HTTP client of the daemon's admin socket at path, whose
// requests may take up to timeout (a retry-all of 100k messages takes
// minutes). The benchmarks call the API through adminclient on it.
func Socket(path string, timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}}
}

// Exchange is an adminclient.Doer that times each exchange with the
// daemon: from sending the request to the last byte of the answer read.
// What the typed client does with the answer next (decoding its JSON) is
// not counted, so that a latency is the daemon's and the socket's, as the
// benchmarks measured it before they called the API through adminclient.
type Exchange struct {
	Doer adminclient.Doer
	// Took is the time of the last exchange.
	Took time.Duration
}

// Do implements adminclient.Doer.
func (e *Exchange) Do(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := e.Doer.Do(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	e.Took = time.Since(start)
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// WaitReady waits until the daemon's readiness (GET /readyz) answers 200,
// for at most tries times 50 ms.
func WaitReady(api *adminclient.Client, tries int) {
	for i := 0; i < tries; i++ {
		var code int
		if _, err := api.Readyz(context.Background(), false, adminclient.Status(&code)); err == nil && code == http.StatusOK {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	Must(fmt.Errorf("not ready"), "start daemon")
}

// Must stops the benchmark on error.
func Must(err error, what string) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %s: %v\n", what, err)
		os.Exit(1)
	}
}

// Plugin is a plugin process launched like the daemon launches it.
type Plugin struct {
	client *plugin.Client
	Raw    any
}

// Launch starts binary and dispenses kind (sdk.KindTenantDeleter, ...).
func Launch(binary, kind string, env ...string) *Plugin {
	cmd := exec.Command(binary)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig: host.Handshake, VersionedPlugins: host.PluginSets(0), Cmd: cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC}, AutoMTLS: true, SkipHostEnv: true,
		StartTimeout: time.Minute, GRPCDialOptions: host.DialOptions(0), Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: os.Stderr}),
	})
	proto, err := c.Client()
	Must(err, "start plugin "+binary)
	raw, err := proto.Dispense(kind)
	Must(err, "dispense")
	return &Plugin{client: c, Raw: raw}
}

// Deleter configures and returns the plugin as a TenantDeleter.
func (p *Plugin) Deleter(cfg map[string]any) sdk.TenantDeleter {
	d := p.Raw.(sdk.TenantDeleter)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := d.Configure(ctx, &sdk.ConfigureRequest{Name: "bench", Config: cfg})
	Must(err, "configure plugin")
	return d
}

// Kill stops the plugin.
func (p *Plugin) Kill() { p.client.Kill() }

// PeakRSS is the plugin process's peak resident set (VmHWM), or 0 when it
// cannot be read.
func (p *Plugin) PeakRSS() int64 {
	rc := p.client.ReattachConfig()
	if rc == nil {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", rc.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(rest), "%d", &kb)
			return kb * 1024
		}
	}
	return 0
}

// Time runs fn and returns how long it took.
func Time(fn func()) time.Duration {
	start := time.Now()
	fn()
	return time.Since(start)
}

// Percentile of sorted durations (p in 0..100).
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p / 100)
	return sorted[i]
}

// Sort sorts durations in place and returns them.
func Sort(d []time.Duration) []time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d
}

// ProcStatus reads a field of /proc/PID/status in kB (VmRSS, VmHWM).
func ProcStatus(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field+":") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				return n
			}
		}
	}
	return -1
}

// Report prints one result line: what, value, and, when a baseline is
// given, the ratio.
func Report(name, format string, args ...any) {
	fmt.Printf("%-58s %s\n", name, fmt.Sprintf(format, args...))
}

// Header prints a section title with the machine it ran on.
func Header(title string) {
	host, _ := os.Hostname()
	fmt.Printf("\n== %s (%s, %d CPU, %s, %s)\n", title, host, runtime.NumCPU(), runtime.Version(), time.Now().UTC().Format(time.RFC3339))
}

// Rate formats n items over d as items/s.
func Rate(n int64, d time.Duration) string {
	return fmt.Sprintf("%.0f/s", float64(n)/d.Seconds())
}
