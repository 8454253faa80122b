// Package testsvc gives tests real servers: a fresh PostgreSQL or MySQL
// (MariaDB) database, a throwaway redis-server, a dynalite (DynamoDB API) server, an in-process
// Kafka broker (kfake), and the project's binaries built for the test run.
// Everything is created per test (or per package, where said) and removed
// in t.Cleanup, so no test depends on what another run left behind.
//
// A missing server program fails the test with what to install; `make test`
// installs them first (see docs/development.md).
package testsvc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mathrand "math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Context returns a context that ends with the test or after d.
func Context(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Need stops the test when something it needs is missing (a program, root):
// under CI=true it fails, because CI installs everything and a skip there
// would hide a test that did not run; elsewhere it skips, saying what is
// missing and how to get it.
func Need(t testing.TB, ok bool, format string, args ...any) {
	t.Helper()
	if ok {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: a missing requirement fails instead of skipping)", msg)
		return
	}
	t.Skip(msg)
}

// Tool returns the path of a program the test runs; see Need for when it
// is not installed.
func Tool(t testing.TB, name, install string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	Need(t, err == nil, "%s is needed (%s)", name, install)
	return path
}

// RepoRoot finds the module root (the directory holding go.mod).
func RepoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate testsvc source")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago,
// for a server a test starts (and may start again) on a fixed port. It is
// taken below the kernel's ephemeral range: a port the kernel hands out
// (":0") is also what it gives the next outgoing connection of any
// process, and a test's broker once failed to bind because a connection
// of a parallel test package had taken its port in between.
func FreePort(t testing.TB) int {
	t.Helper()
	low, _ := ephemeralRange()
	for try := 0; try < 200; try++ {
		port := freePortFloor + mathrand.IntN(low-freePortFloor)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		return port
	}
	t.Fatalf("free port: no free port in %d-%d after 200 tries", freePortFloor, low-1)
	return 0
}

// freePortFloor is the lowest port FreePort hands out: above the ports of
// the servers the machine itself runs (PostgreSQL, Redis, ...).
const freePortFloor = 20000

// ephemeralRange is the kernel's range of ports for outgoing connections
// (Linux's default when it cannot be read).
func ephemeralRange() (low, high int) {
	low, high = 32768, 60999
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return low, high
	}
	var l, h int
	if _, err := fmt.Sscanf(string(b), "%d %d", &l, &h); err == nil && l > freePortFloor+1000 {
		return l, h
	}
	return low, high
}

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ShortTempDir returns a temporary directory with a short path, for Unix
// sockets (sun_path allows about 107 bytes; t.TempDir paths can be longer).
func ShortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "lcd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// --- PostgreSQL ---

// PGAdminDSN is the server tests create databases on: LIFECYCLED_TEST_PG, or
// the local server with trust auth.
func PGAdminDSN() string {
	if v := os.Getenv("LIFECYCLED_TEST_PG"); v != "" {
		return v
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// PGDatabase creates an empty database for this test and drops it afterwards.
// It returns the DSN of the new database.
func PGDatabase(t testing.TB) string {
	t.Helper()
	return pgDatabase(t, "")
}

// PGDatabaseFrom is PGDatabase with a copy of the database template (one
// NewPGImage made) instead of an empty one.
func PGDatabaseFrom(t testing.TB, template string) string {
	t.Helper()
	return pgDatabase(t, template)
}

// copyStrategy is how a template is copied: file by file where that is
// cheap, on a PostgreSQL 15 or later without fsync (the throwaway server of
// scripts/test-pg.sh), where the copy's checkpoints write nothing to disk;
// otherwise the server's default. Copying through the WAL (15's default)
// took a ninth of the server's CPU in the store and dlq packages.
func copyStrategy(ctx context.Context, conn *pgx.Conn) string {
	var fsync string
	var version int
	err := conn.QueryRow(ctx, "SELECT current_setting('fsync'), current_setting('server_version_num')::int").Scan(&fsync, &version)
	if err != nil || fsync != "off" || version < 150000 {
		return ""
	}
	return " STRATEGY FILE_COPY"
}

func pgDatabase(t testing.TB, template string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := PGAdminDSN()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("PostgreSQL is needed at %s (set LIFECYCLED_TEST_PG, or run `make test` which starts it): %v", redact(admin), err)
	}
	defer conn.Close(ctx)
	name := "lcd_test_" + randomSuffix()
	create := "CREATE DATABASE " + name
	if template != "" {
		create += " TEMPLATE " + pgx.Identifier{template}.Sanitize() + copyStrategy(ctx, conn)
	}
	if _, err := conn.Exec(ctx, create); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Logf("drop database %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	dsn, err := PGDSN(name)
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

// PGDSN is the DSN of the database name on the server of PGAdminDSN.
func PGDSN(name string) (string, error) {
	u, err := url.Parse(PGAdminDSN())
	if err != nil {
		return "", fmt.Errorf("LIFECYCLED_TEST_PG must be a postgres:// URL: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

func redact(dsn string) string {
	if i := strings.Index(dsn, "@"); i > 0 {
		if j := strings.Index(dsn, "://"); j > 0 && strings.Contains(dsn[j+3:i], ":") {
			return dsn[:j+3] + "***" + dsn[i:]
		}
	}
	return dsn
}

// --- Redis ---

// RedisServer is a throwaway redis-server.
type RedisServer struct {
	Addr    string
	t       testing.TB
	port    int
	dir     string
	persist bool
	mu      sync.Mutex
	cmd     *exec.Cmd
}

// Redis starts a redis-server on a free port, stopped at cleanup.
func Redis(t testing.TB) *RedisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server is needed (Debian: apt-get install redis-server; `make test` installs it)")
	}
	port := FreePort(t)
	r := &RedisServer{t: t, port: port, dir: t.TempDir(), Addr: fmt.Sprintf("127.0.0.1:%d", port)}
	r.Start()
	t.Cleanup(r.Stop)
	return r
}

// RedisPersistent is Redis that keeps its data across Stop and Start
// (append-only file, fsync always), for outage tests.
func RedisPersistent(t testing.TB) *RedisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server is needed (Debian: apt-get install redis-server; `make test` installs it)")
	}
	port := FreePort(t)
	r := &RedisServer{t: t, port: port, dir: t.TempDir(), persist: true, Addr: fmt.Sprintf("127.0.0.1:%d", port)}
	r.Start()
	t.Cleanup(r.Stop)
	return r
}

// Start starts the server (again) on its port.
func (r *RedisServer) Start() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return
	}
	aof := "no"
	if r.persist {
		aof = "yes"
	}
	cmd := exec.Command("redis-server", "--port", fmt.Sprint(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", aof, "--appendfsync", "always", "--dir", r.dir, "--protected-mode", "no")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("start redis-server: %v", err)
	}
	r.cmd = cmd
	waitTCP(r.t, r.Addr, 10*time.Second)
}

// Stop kills the server; data is lost (it keeps nothing on disk).
func (r *RedisServer) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.cmd = nil
}

func waitTCP(t testing.TB, addr string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s did not start listening within %s", addr, d)
}

// --- dynalite (DynamoDB API) ---

// Dynalite starts a dynalite server (in memory) and returns its endpoint URL.
func Dynalite(t testing.TB) string {
	t.Helper()
	return NewDynalite(t).Endpoint
}

// DynaliteServer is a dynalite server that a test may stop and start
// again on its port (in memory: tables do not survive a stop).
type DynaliteServer struct {
	Endpoint string
	t        testing.TB
	port     int
	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan error
	out      *SyncBuffer
}

// NewDynalite starts a dynalite server, stopped at cleanup.
func NewDynalite(t testing.TB) *DynaliteServer {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is needed to run dynalite (Debian: apt-get install nodejs npm)")
	}
	if _, err := os.Stat(filepath.Join(RepoRoot(t), "test", "dynalite", "node_modules", "dynalite", "cli.js")); err != nil {
		t.Fatalf("dynalite is not installed: run `npm ci --prefix test/dynalite` (make test does): %v", err)
	}
	d := &DynaliteServer{t: t, port: FreePort(t)}
	d.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", d.port)
	d.Start()
	t.Cleanup(func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.cmd == nil {
			return
		}
		select {
		case err := <-d.exited:
			// It died before the test ended: say how, or a test fails later
			// with a bare "connection refused".
			t.Errorf("dynalite exited during the test (%v); its output:\n%s", err, tail(d.out.String(), 40))
		default:
			_ = d.cmd.Process.Kill()
			<-d.exited
		}
	})
	return d
}

// Start starts the server (again) on its port.
func (d *DynaliteServer) Start() {
	d.t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd != nil {
		return
	}
	node, _ := exec.LookPath("node")
	// serve.js runs dynalite's cli.js, surviving requests a client aborts.
	cli := filepath.Join(RepoRoot(d.t), "test", "dynalite", "serve.js")
	// Tables become ACTIVE at once: SDK waiters would otherwise sleep 20 s.
	cmd := exec.Command(node, cli, "--port", fmt.Sprint(d.port), "--host", "127.0.0.1",
		"--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	d.out = &SyncBuffer{}
	cmd.Stdout, cmd.Stderr = d.out, d.out
	if err := cmd.Start(); err != nil {
		d.t.Fatalf("start dynalite: %v", err)
	}
	d.exited = make(chan error, 1)
	go func(exited chan<- error) { exited <- cmd.Wait() }(d.exited)
	d.cmd = cmd
	waitTCP(d.t, fmt.Sprintf("127.0.0.1:%d", d.port), 20*time.Second)
}

// Stop kills the server; its tables are lost.
func (d *DynaliteServer) Stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return
	}
	_ = d.cmd.Process.Kill()
	<-d.exited
	d.cmd = nil
}
