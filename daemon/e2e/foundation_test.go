package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

type envelope struct {
	Error struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		RequestID string `json:"request_id"`
		Details   []any  `json:"details"`
	} `json:"error"`
}

func decodeEnvelope(t *testing.T, body []byte) envelope {
	t.Helper()
	var e envelope
	require.NoError(t, json.Unmarshal(body, &e), "%s", body)
	require.NotEmpty(t, e.Error.Code, "%s", body)
	require.NotNil(t, e.Error.Details)
	return e
}

func TestRepoConfigServesAndStopsCleanly(t *testing.T) {
	t.Parallel()
	// The repository's config.toml, as `make run` uses it, in a scratch
	// directory (its relative paths are anchored at the file).
	dir := testsvc.ShortTempDir(t)
	repoCfg, err := os.ReadFile(filepath.Join(testsvc.RepoRoot(t), "config.toml"))
	require.NoError(t, err)
	cfgPath := filepath.Join(dir, "config.toml")
	require.NoError(t, os.WriteFile(cfgPath, repoCfg, 0o600))
	d := testsvc.NewDaemon(t, testsvc.DaemonOptions{Dir: dir, Socket: filepath.Join(dir, "var", "lifecycled.sock")})
	d.ConfigPath = cfgPath
	d.Start()
	d.WaitServing(30 * time.Second)

	var a apitest.Answer
	api := apitest.Record(d, &a)
	api.Healthz(t.Context())
	require.Equal(t, 200, a.Code, "%s", a.Body)
	api.Readyz(t.Context(), false)
	require.Equal(t, 200, a.Code, "%s", a.Body)
	api.Readyz(t.Context(), true)
	require.Equal(t, 200, a.Code)
	require.Contains(t, string(a.Body), `"state_store"`)
	api.Metrics(t.Context())
	require.Equal(t, 200, a.Code)
	require.Contains(t, string(a.Body), "lifecycled_build_info{")

	out, errOut, exit := d.CLI("status")
	require.Equal(t, 0, exit, "stdout: %s\nstderr: %s", out, errOut)
	require.Contains(t, out, "ready")
	out, _, exit = d.CLI("--format", "json", "status")
	require.Equal(t, 0, exit)
	var st map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &st), "json prints the API body")
	require.Equal(t, true, st["ready"])

	fi, err := os.Stat(d.Socket)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o660), fi.Mode().Perm())
	require.NotZero(t, fi.Mode()&os.ModeSocket)
	dfi, err := os.Stat(filepath.Join(dir, "var"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o750), dfi.Mode().Perm(), "socket directory is 0750")

	// The daemon's idle memory, for the record.
	if status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.PID())); err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			if strings.HasPrefix(line, "VmRSS") {
				t.Logf("idle daemon %s", line)
			}
		}
	}

	d.Signal(syscall.SIGTERM)
	require.Equal(t, 0, d.Wait(30*time.Second), "SIGTERM drains and exits 0")
	_, err = os.Lstat(d.Socket)
	require.True(t, os.IsNotExist(err), "socket removed on exit")
}

func TestSecondDaemonOnTheSameSocketIsRefused(t *testing.T) {
	t.Parallel()
	a := testsvc.StartDaemon(t, testsvc.DaemonOptions{})
	// The second one has a plugin: it must find the live socket before it
	// starts it (a Kafka source would join the consumer group).
	b := testsvc.NewDaemon(t, testsvc.DaemonOptions{Socket: a.Socket,
		Extra: "[[deleter]]\nname = \"redis:s\"\nplugin = \"redis\"\n[deleter.config]\naddr = \"127.0.0.1:1\"\npatterns = [\"s:{tenant}\"]\n"})
	b.Start()
	require.NotEqual(t, 0, b.Wait(30*time.Second))
	require.Contains(t, b.Logs(), "is lifecycled already running")
	require.NotContains(t, b.Logs(), "lifecycled-plugin-redis", "no plugin was started")
	require.Equal(t, 200, healthz(t, a), "the first daemon keeps serving")
	_, err := os.Lstat(a.Socket)
	require.NoError(t, err, "the refused daemon did not remove the live socket")
}

func TestStaleSocketIsReplaced(t *testing.T) {
	t.Parallel()
	dir := testsvc.ShortTempDir(t)
	sock := filepath.Join(dir, "admin.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	require.NoError(t, err)
	l.SetUnlinkOnClose(false)
	require.NoError(t, l.Close()) // a daemon that died: the file stays, nobody listens
	_, err = os.Lstat(sock)
	require.NoError(t, err)

	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Dir: dir, Socket: sock})
	require.Equal(t, 200, healthz(t, d))
}

func TestRegularFileAtSocketPathIsLeftAlone(t *testing.T) {
	t.Parallel()
	dir := testsvc.ShortTempDir(t)
	sock := filepath.Join(dir, "admin.sock")
	require.NoError(t, os.WriteFile(sock, []byte("important data"), 0o600))
	d := testsvc.NewDaemon(t, testsvc.DaemonOptions{Dir: dir, Socket: sock})
	d.Start()
	require.NotEqual(t, 0, d.Wait(30*time.Second))
	require.Contains(t, d.Logs(), "is a regular file")
	data, err := os.ReadFile(sock)
	require.NoError(t, err)
	require.Equal(t, "important data", string(data), "never unlinked")
}

func TestAuditLineNamesTheCaller(t *testing.T) {
	t.Parallel()
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{})
	code, body := apitest.Refused(apitest.Client(d).RequestDeletion(t.Context(), "550e8400-e29b-41d4-a716-446655440000", nil, adminclient.Header("X-Request-Id", "req_audit_test")))(t)
	require.Equal(t, 409, code, "no deleters configured: %s", body)
	testsvc.Eventually(t, 5*time.Second, func() bool { return strings.Contains(d.Logs(), "req_audit_test") }, "audit line written")
	var audit map[string]any
	for _, line := range strings.Split(d.Logs(), "\n") {
		if strings.Contains(line, `"audit"`) && strings.Contains(line, "req_audit_test") {
			require.NoError(t, json.Unmarshal([]byte(line), &audit))
		}
	}
	require.NotNil(t, audit, "audit line")
	require.EqualValues(t, os.Getuid(), audit["uid"])
	require.EqualValues(t, os.Getgid(), audit["gid"])
	require.EqualValues(t, os.Getpid(), audit["pid"])
	require.Equal(t, "POST", audit["method"])
	require.EqualValues(t, 409, audit["status"])
}

func TestHostOriginAndEnvelope(t *testing.T) {
	t.Parallel()
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{})
	evilHost := adminclient.New(doerFunc(func(req *http.Request) (*http.Response, error) {
		req.Host = "evil.example.com"
		return d.HTTP().Do(req)
	}))
	code, body := apitest.Refused(evilHost.Healthz(t.Context()))(t)
	require.Equal(t, 400, code)
	require.Equal(t, "SYS_VALIDATION_ERROR", decodeEnvelope(t, body).Error.Code)

	code, body = apitest.Refused(apitest.Client(d).Status(t.Context(), adminclient.Header("Origin", "https://evil.example.com")))(t)
	require.Equal(t, 403, code)
	require.Equal(t, "SYS_FORBIDDEN", decodeEnvelope(t, body).Error.Code)

	// An empty Host (HTTP/1.1 allows it on a Unix socket) is accepted.
	c, err := net.Dial("unix", d.Socket)
	require.NoError(t, err)
	defer c.Close()
	healthzPath := apitest.PathOf(func(api *adminclient.Client) { api.Healthz(t.Context()) })
	_, err = fmt.Fprint(c, "GET "+healthzPath+" HTTP/1.1\r\nHost:\r\nConnection: close\r\n\r\n")
	require.NoError(t, err)
	line, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, line, "200")

	// Unknown routes answer in the envelope, with the request id of the header.
	code, body = socketGet(t, d, adminclient.APIPrefix+"nothing-here", http.Header{"X-Request-Id": {"req_mine_123"}})
	require.Equal(t, 404, code)
	e := decodeEnvelope(t, body)
	require.Equal(t, "SYS_NOT_FOUND", e.Error.Code)
	require.Equal(t, "req_mine_123", e.Error.RequestID)

	// Bodies are capped at 1 MiB.
	big := make([]byte, 1<<20+1)
	code, body = apitest.Refused(apitest.Client(d).RequestDeletion(t.Context(), "550e8400-e29b-41d4-a716-446655440000", nil, adminclient.Body(big)))(t)
	require.Equal(t, 413, code, "%s", body)
	require.Equal(t, "SYS_TENANT_VALIDATION_ERROR", decodeEnvelope(t, body).Error.Code)
}

func TestAccessPolicyFromPeerCredentials(t *testing.T) {
	t.Parallel()
	uid := os.Getuid()
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Admin: fmt.Sprintf("allow_uids = [%d]\nread_only_uids = [%d]", uid+4242, uid)})
	var a apitest.Answer
	apitest.Record(d, &a).Status(t.Context())
	require.Equal(t, 200, a.Code, "read-only callers may GET: %s", a.Body)
	code, body := apitest.Refused(apitest.Client(d).RequestDeletion(t.Context(), "550e8400-e29b-41d4-a716-446655440000", nil))(t)
	require.Equal(t, 403, code)
	e := decodeEnvelope(t, body)
	require.Equal(t, "SYS_TENANT_FORBIDDEN", e.Error.Code)
	require.Contains(t, e.Error.Message, "read-only")

	other := testsvc.StartDaemon(t, testsvc.DaemonOptions{Admin: fmt.Sprintf("allow_uids = [%d]", uid+4242)})
	code, body = apitest.Refused(apitest.Client(other).Status(t.Context()))(t)
	require.Equal(t, 403, code, "%s", body)
	require.Contains(t, decodeEnvelope(t, body).Error.Message, "not in admin.allow_uids")
}

func TestMetricsListenerServesOnlyMetricsAndHealth(t *testing.T) {
	t.Parallel()
	port := testsvc.FreePort(t)
	testsvc.StartDaemon(t, testsvc.DaemonOptions{Admin: fmt.Sprintf("metrics_listen = \"127.0.0.1:%d\"", port)})
	var a apitest.Answer
	tcp := apitest.RecordThrough(onMetricsPort(port), &a)
	tcp.Metrics(t.Context())
	require.Equal(t, 200, a.Code, "%s", a.Body)
	tcp.Healthz(t.Context())
	require.Equal(t, 200, a.Code, "%s", a.Body)
	tcp.Readyz(t.Context(), false)
	require.Equal(t, 200, a.Code, "%s", a.Body)
	tcp.Status(t.Context())
	require.Equal(t, 404, a.Code, "the API is only on the socket: %s", a.Body)
	code, err := httpGet(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/", port))
	require.NoError(t, err)
	require.Equal(t, 404, code, "pprof is only on the socket")
}

// Issue 33 case 8: /debug/pprof was always on, for read-only uids too
// (goroutine dumps, the daemon's command line, profiles of any length).
// It is off unless admin.pprof is set, and then for full-access callers
// only.
func TestPprofIsOffByDefaultAndForAdminsOnly(t *testing.T) {
	t.Parallel()
	uid := os.Getuid()
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{})
	code, _ := socketGet(t, d, "/debug/pprof/", nil)
	require.Equal(t, 404, code, "off by default")
	code, _ = socketGet(t, d, "/debug/pprof/cmdline", nil)
	require.Equal(t, 404, code)

	on := testsvc.StartDaemon(t, testsvc.DaemonOptions{Admin: "pprof = true"})
	code, _ = socketGet(t, on, "/debug/pprof/", nil)
	require.Equal(t, 200, code, "on when asked for")

	readOnly := testsvc.StartDaemon(t, testsvc.DaemonOptions{Admin: fmt.Sprintf("pprof = true\nallow_uids = [%d]\nread_only_uids = [%d]", uid+4242, uid)})
	code, body := socketGet(t, readOnly, "/debug/pprof/cmdline", nil)
	require.Equal(t, 403, code, "read-only callers get no profiles: %s", body)
	require.Contains(t, string(body), "read-only")
}

func TestSdNotifyReadyReloadAndStopping(t *testing.T) {
	dir := testsvc.ShortTempDir(t)
	notify, next := notifyListener(t, dir)
	// WatchdogSec=400ms as systemd passes it: keep-alives every 200ms.
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Dir: dir, Env: []string{"NOTIFY_SOCKET=" + notify, "WATCHDOG_USEC=400000"}})
	ready := next("READY=1")
	require.Contains(t, ready, "STATUS=ready; 0/0 plugins running")
	next("WATCHDOG=1")

	// Break the config and reload: refused, the old config keeps serving.
	good, err := os.ReadFile(d.ConfigPath)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(d.ConfigPath, append(good, []byte("\nbogus_key = 1\n")...), 0o600))
	d.Signal(syscall.SIGHUP)
	reloading := next("RELOADING=1")
	require.Contains(t, reloading, "MONOTONIC_USEC=")
	next("READY=1")
	testsvc.Eventually(t, 10*time.Second, func() bool { return strings.Contains(d.Logs(), "reload refused") }, "reload refused logged")
	require.Contains(t, d.Logs(), "bogus_key")
	require.True(t, apitest.Ready(d)(), "still serving with the old config")

	d.Signal(syscall.SIGTERM)
	next("STOPPING=1")
	require.Equal(t, 0, d.Wait(30*time.Second))
}

func TestInvalidConfigExitsWithExConfig(t *testing.T) {
	t.Parallel()
	d := testsvc.NewDaemon(t, testsvc.DaemonOptions{Daemon: `shutdown_timeout = "soon"`})
	d.Start()
	require.Equal(t, 78, d.Wait(30*time.Second))
	require.Contains(t, d.Logs(), "daemon.shutdown_timeout")
	require.Contains(t, d.Logs(), "config.toml:")
}

func TestDaemonOnPostgresStateStore(t *testing.T) {
	t.Parallel()
	// A password in the DSN's query string (trust auth ignores it) must not
	// reach the start-up log, the status answer or config dump.
	state := testsvc.PGDatabase(t) + "&password=hunter2-in-query"
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{State: state})
	var st map[string]any
	var body []byte
	apitest.Expect(t, d, 200, &st).Status(t.Context(), adminclient.Raw(&body))
	require.Equal(t, "postgres", st["state_store"].(map[string]any)["dialect"])
	require.NotContains(t, string(body), "hunter2")
	out, _, code := runCLI(t, d.Dir, "config", "dump", "--config", d.ConfigPath)
	require.Equal(t, 0, code)
	require.NotContains(t, out, "hunter2")
	require.Contains(t, d.Logs(), "state store open")
	require.NotContains(t, d.Logs(), "hunter2")
}

func runCLI(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(testsvc.Binaries(t), "lifecycled"), args...)
	cmd.Dir = dir
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return o.String(), e.String(), code
}

func TestCLIConfigMigrateAndExitCodes(t *testing.T) {
	t.Parallel()
	dir := testsvc.ShortTempDir(t)
	d := testsvc.NewDaemon(t, testsvc.DaemonOptions{Dir: dir, Extra: "[[dlq_source]]\nname = \"kafka\"\nplugin = \"kafka\"\n[dlq_source.config]\nbrokers = [\"127.0.0.1:1\"]\nsasl_password = \"hunter2-secret\"\n"})

	out, errOut, code := runCLI(t, dir, "config", "validate", "--no-plugins", "--config", d.ConfigPath)
	require.Equal(t, 0, code, "%s %s", out, errOut)
	out, _, code = runCLI(t, dir, "config", "dump", "--config", d.ConfigPath)
	require.Equal(t, 0, code)
	require.NotContains(t, out, "hunter2-secret")
	require.Contains(t, out, "REDACTED")
	out, _, code = runCLI(t, dir, "config", "default")
	require.Equal(t, 0, code)
	require.Contains(t, out, "version = 1")

	bad := filepath.Join(dir, "bad.toml")
	require.NoError(t, os.WriteFile(bad, []byte("version = 1\n[retry]\njitter = \"lots\"\n"), 0o600))
	_, errOut, code = runCLI(t, dir, "config", "validate", "--config", bad)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "bad.toml:3: retry.jitter")
	// The file as an argument, as the package's docs write it.
	_, errOut, code = runCLI(t, dir, "config", "validate", bad)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "bad.toml:3: retry.jitter")
	out, errOut, code = runCLI(t, dir, "config", "validate", "--no-plugins", d.ConfigPath)
	require.Equal(t, 0, code, "%s %s", out, errOut)
	_, errOut, code = runCLI(t, dir, "config", "validate", "--config", d.ConfigPath, bad)
	require.Equal(t, 1, code, "two files: %s", errOut)
	require.Contains(t, errOut, "give the config file once")

	out, _, code = runCLI(t, dir, "migrate", "status", "--config", d.ConfigPath)
	require.Equal(t, 0, code)
	require.Contains(t, out, "current version: 0")
	out, _, code = runCLI(t, dir, "migrate", "up", "--config", d.ConfigPath)
	require.Equal(t, 0, code)
	require.Contains(t, out, "pending: none")

	// Client exit codes: no daemon -> 1 with a hint; a server error -> 2.
	_, errOut, code = runCLI(t, dir, "--addr", "unix://"+filepath.Join(dir, "nobody.sock"), "status")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "Is the daemon running?")
	live := testsvc.StartDaemon(t, testsvc.DaemonOptions{})
	_, errOut, code = live.CLI("tenant", "count", "not-a-uuid")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "SYS_TENANT_VALIDATION_ERROR")
	_, errOut, code = live.CLI("tenant", "delete", "550e8400-e29b-41d4-a716-446655440000")
	require.Equal(t, 1, code, "no --yes and no terminal")
	require.Contains(t, errOut, "--yes")
	out, _, code = live.CLI("plugins", "checksum", filepath.Join(live.Bin, "lifecycled-plugin-redis"))
	require.Equal(t, 0, code)
	require.Regexp(t, `^[0-9a-f]{64}  `, out)
}

func TestNewerSchemaStopsTheDaemon(t *testing.T) {
	t.Parallel()
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{})
	d.Signal(syscall.SIGTERM)
	require.Equal(t, 0, d.Wait(30*time.Second))
	require.NoError(t, bumpSQLiteSchema(filepath.Join(d.Dir, "state.db"), 999))
	d.Start()
	require.Equal(t, 78, d.Wait(30*time.Second), "EX_CONFIG: systemd must not restart-loop on it")
	require.Contains(t, d.Logs(), "newer than this lifecycled binary")
	require.Contains(t, d.Logs(), "version 999")
	require.NotContains(t, d.Logs(), "makeFuncStub", "the cause alone, not fx's wrapping")
	require.NotContains(t, d.Logs(), "could not build arguments")
}

func TestStateStoreRefusingTheCredentialsExitsWithExConfig(t *testing.T) {
	t.Parallel()
	admin := testsvc.PGAdminDSN()
	u, err := url.Parse(testsvc.PGDatabase(t))
	require.NoError(t, err)
	u.User = url.User("no_such_role_" + fmt.Sprint(time.Now().UnixNano()%100000))
	_ = admin
	d := testsvc.NewDaemon(t, testsvc.DaemonOptions{State: u.String()})
	d.Start()
	require.Equal(t, 78, d.Wait(60*time.Second))
	require.Contains(t, d.Logs(), "does not exist")
	require.NotContains(t, d.Logs(), "makeFuncStub")
}
