package benchkit

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lifecycled/lifecycled/daemon/adminclient"
)

// PGAdmin is the DSN of the PostgreSQL server the benchmarks make their
// databases on: LIFECYCLED_TEST_PG, or the local server of the tests.
func PGAdmin() string {
	if v := os.Getenv("LIFECYCLED_TEST_PG"); v != "" {
		return v
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// TempDatabase creates a database named prefix_<nanoseconds> on the server
// of adminDSN and returns its DSN and drop, which drops it (WITH FORCE:
// connections still open to it are closed).
func TempDatabase(ctx context.Context, adminDSN, prefix string) (dsn string, drop func()) {
	admin, err := pgx.Connect(ctx, adminDSN)
	Must(err, "connect to PostgreSQL")
	defer admin.Close(ctx)
	name := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
	_, err = admin.Exec(ctx, "CREATE DATABASE "+name)
	Must(err, "create database")
	u, err := url.Parse(adminDSN)
	Must(err, "parse "+adminDSN)
	u.Path = "/" + name
	return u.String(), func() {
		ctx := context.Background()
		if admin, err := pgx.Connect(ctx, adminDSN); err == nil {
			_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			admin.Close(ctx)
		}
	}
}

// DaemonConfig is what differs between the benchmarks' daemons. The config
// StartDaemon writes is
//
//	version = 1
//	[daemon]
//	state = State
//	plugin_dir = Bin()
//	log_level = LogLevel
//	[admin]
//	listen = "unix://<the socket>"
//	[deletion]                             (when ReceiptKey or Deletion)
//	receipt_key_file = "<the key>"         (when ReceiptKey)
//	Deletion
//	[retry]
//	enabled = false
//	Rest
type DaemonConfig struct {
	// DirPrefix is the pattern of the temporary directory (os.MkdirTemp)
	// that holds the config, the admin socket and the receipt key.
	DirPrefix string
	// State is the DSN of the state store.
	State string
	// LogLevel is "warn" when empty.
	LogLevel string
	// ReceiptKey makes a receipt signing key with `lifecycled receipt
	// keygen` in the directory and names it in [deletion]: the daemon
	// refuses to start without one, and with PostgreSQL as the state store
	// it has no state directory to make one in (unless StateDirectory).
	ReceiptKey bool
	// Deletion is more lines of [deletion] (each ending in a newline).
	Deletion string
	// Rest is the benchmark's own tables, after [retry].
	Rest string
	// StateDirectory gives the daemon STATE_DIRECTORY=<the directory>.
	StateDirectory bool
	// Timeout is the longest one admin call may take.
	Timeout time.Duration
	// ReadyTries is how many times 50 ms StartDaemon waits for readiness.
	ReadyTries int
}

// Daemon is a ./bin/lifecycled run by a benchmark.
type Daemon struct {
	Cmd *exec.Cmd
	// Dir holds Config, Socket and the receipt key; Stop removes it.
	Dir, Socket, Config string
	// API calls the admin API through Exchange, which times each call.
	API      *adminclient.Client
	Exchange *Exchange
}

// StartDaemon writes the config of c, starts `bin/lifecycled run` on it
// and waits until it is ready. Stop stops it.
func StartDaemon(c DaemonConfig) *Daemon {
	d := &Daemon{}
	var err error
	d.Dir, err = os.MkdirTemp("", c.DirPrefix)
	Must(err, "temporary directory")
	d.Socket = filepath.Join(d.Dir, "admin.sock")
	d.Config = filepath.Join(d.Dir, "config.toml")
	if c.ReceiptKey {
		out, err := exec.Command(filepath.Join(Bin(), "lifecycled"), "receipt", "keygen", d.receiptKey()).CombinedOutput()
		Must(err, "receipt keygen: "+string(out))
	}
	d.WriteConfig(c)
	d.Cmd = exec.Command(filepath.Join(Bin(), "lifecycled"), "run", "--config", d.Config)
	d.Cmd.Stderr = os.Stderr
	if c.StateDirectory {
		d.Cmd.Env = append(os.Environ(), "STATE_DIRECTORY="+d.Dir)
	}
	d.Cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	Must(d.Cmd.Start(), "start daemon (run make build)")
	d.Exchange = &Exchange{Doer: Socket(d.Socket, c.Timeout)}
	d.API = adminclient.New(d.Exchange)
	WaitReady(d.API, c.ReadyTries)
	return d
}

func (d *Daemon) receiptKey() string { return filepath.Join(d.Dir, "receipt.key") }

// WriteConfig writes the config of c over the daemon's (for a reload).
func (d *Daemon) WriteConfig(c DaemonConfig) {
	level := c.LogLevel
	if level == "" {
		level = "warn"
	}
	var b strings.Builder
	fmt.Fprintf(&b, `version = 1
[daemon]
state = %q
plugin_dir = %q
log_level = %q
[admin]
listen = "unix://%s"
`, c.State, Bin(), level, d.Socket)
	if c.ReceiptKey || c.Deletion != "" {
		b.WriteString("[deletion]\n")
	}
	if c.ReceiptKey {
		fmt.Fprintf(&b, "receipt_key_file = %q\n", d.receiptKey())
	}
	b.WriteString(c.Deletion)
	b.WriteString("[retry]\nenabled = false\n")
	b.WriteString(c.Rest)
	Must(os.WriteFile(d.Config, []byte(b.String()), 0o600), "write config")
}

// Stop stops the daemon (SIGTERM, then waits for it) and removes its
// directory.
func (d *Daemon) Stop() {
	_ = d.Cmd.Process.Signal(syscall.SIGTERM)
	_ = d.Cmd.Wait()
	os.RemoveAll(d.Dir)
}

// KafkaDaemon is a Daemon whose state store is a PostgreSQL database of its
// own, with one Kafka dead-letter source.
type KafkaDaemon struct {
	*Daemon
	// DSN is the state store's; Drop drops it.
	DSN  string
	Drop func()
}

// StartKafkaDaemon starts a daemon, as dlqbench and searchbench run it, on
// a fresh PostgreSQL database (TempDatabase with dbPrefix) and a directory
// made with dirPrefix, with a receipt key, retry and archive off and one
// dlq_source "kafka" on broker; source is the rest of its
// [dlq_source.config] (group_id, ...), each line ending in a newline. The
// caller stops it with Stop and drops its database with Drop.
func StartKafkaDaemon(dbPrefix, dirPrefix, broker, source string) *KafkaDaemon {
	d := &KafkaDaemon{}
	d.DSN, d.Drop = TempDatabase(context.Background(), PGAdmin(), dbPrefix)
	d.Daemon = StartDaemon(DaemonConfig{
		DirPrefix: dirPrefix, State: d.DSN, ReceiptKey: true,
		Rest: fmt.Sprintf(`[archive]
enabled = false
[[dlq_source]]
name = "kafka"
plugin = "kafka"
[dlq_source.config]
brokers = [%q]
`, broker) + source,
		Timeout: 10 * time.Minute, ReadyTries: 600,
	})
	return d
}
