// Package config loads, checks and prints lifecycled's config.toml.
//
// Loading is strict in the way operators need from a daemon that deletes data:
// unknown keys are errors, every problem is reported at once with the file,
// line and key, durations are strings, string values may use ${VAR} and
// ${VAR:-default}, and secrets may come from files (*_file keys) so that they
// never have to be written into the config itself.
package config

import (
	"fmt"
	"strconv"
	"time"

	"github.com/lifecycled/lifecycled/sdk/host"
)

// CurrentVersion is the only config schema version this binary understands.
const CurrentVersion = 1

// Config is the whole of config.toml after defaults were applied.
type Config struct {
	Version     int               `toml:"version"`
	Daemon      Daemon            `toml:"daemon"`
	Admin       Admin             `toml:"admin"`
	Retry       Retry             `toml:"retry"`
	DLQ         DLQ               `toml:"dlq"`
	Archive     Archive           `toml:"archive"`
	Idempotency Idempotency       `toml:"idempotency"`
	Deletion    Deletion          `toml:"deletion"`
	Plugins     PluginDefaults    `toml:"plugins"`
	Deleters    []PluginInstance  `toml:"deleter"`
	DLQSources  []PluginInstance  `toml:"dlq_source"`
	Path        string            `toml:"-"` // file the config came from, for messages
	Dir         string            `toml:"-"` // relative paths are resolved against this
	secrets     map[string]string // resolved *_file contents, by dotted key
}

// Daemon holds process-wide settings.
type Daemon struct {
	State             string   `toml:"state"`
	StatePasswordFile string   `toml:"state_password_file"`
	PluginDir         string   `toml:"plugin_dir"`
	ShutdownTimeout   Duration `toml:"shutdown_timeout"`
	TenantIDFormat    string   `toml:"tenant_id_format"`
	LogLevel          string   `toml:"log_level"`
	LogFormat         string   `toml:"log_format"`
}

// Admin configures the admin API listener.
type Admin struct {
	Listen        string `toml:"listen"`
	SocketMode    string `toml:"socket_mode"`
	SocketGroup   string `toml:"socket_group"`
	AllowUIDs     []int  `toml:"allow_uids"`
	AllowGIDs     []int  `toml:"allow_gids"`
	ReadOnlyUIDs  []int  `toml:"read_only_uids"`
	ReadOnlyGIDs  []int  `toml:"read_only_gids"`
	MetricsListen string `toml:"metrics_listen"`
	// Pprof serves /debug/pprof on the socket, to callers with full access
	// only: profiles show the daemon's command line, its goroutines and
	// what it holds, and a CPU profile runs as long as it is asked to.
	Pprof bool `toml:"pprof"`
}

// Retry is the automatic dead-letter retry policy.
type Retry struct {
	Enabled      bool     `toml:"enabled"`
	MaxRetries   int      `toml:"max_retries"`
	InitialDelay Duration `toml:"initial_delay"`
	Multiplier   float64  `toml:"multiplier"`
	MaxDelay     Duration `toml:"max_delay"`
	Jitter       string   `toml:"jitter"`
	PollInterval Duration `toml:"poll_interval"`
	Lease        Duration `toml:"lease"`
}

// Archive is the retention policy.
type Archive struct {
	Enabled          bool     `toml:"enabled"`
	Interval         Duration `toml:"interval"`
	Retention        Duration `toml:"retention"`
	ArchiveRetention Duration `toml:"archive_retention"`
	BatchSize        int      `toml:"batch_size"`
}

// Idempotency configures Idempotency-Key handling on POST routes.
type Idempotency struct {
	TTL            Duration `toml:"ttl"`
	MismatchStatus int      `toml:"mismatch_status"`
	LockTimeout    Duration `toml:"lock_timeout"`
}

// Deletion configures tenant deletion jobs.
type Deletion struct {
	Concurrency       int      `toml:"concurrency"`
	RetryInitialDelay Duration `toml:"retry_initial_delay"`
	RetryMaxDelay     Duration `toml:"retry_max_delay"`
	Verify            bool     `toml:"verify"`
	PollInterval      Duration `toml:"poll_interval"`
	Lease             Duration `toml:"lease"`
	// GracePeriod is the least time between a deletion request and its
	// start; the job waits in SCHEDULED until then and can be cancelled.
	GracePeriod Duration `toml:"grace_period"`
	// MaxJobs is how many tenants are erased at once, across every daemon
	// sharing the state store (and on each of them).
	MaxJobs int `toml:"max_jobs"`
	// ReceiptKeyFile is the Ed25519 key (PEM, PKCS #8) that signs erasure
	// receipts; empty: one generated at first start (ReceiptKeyPath).
	ReceiptKeyFile string `toml:"receipt_key_file"`
	// RequireApproval keeps new jobs AWAITING_APPROVAL until an operator
	// approves the plan they saw (POST .../deletion/approve).
	RequireApproval bool `toml:"require_approval"`
	// ApproversDistinct refuses an approval from the uid that requested
	// the job: two people for every erasure that needs an approval.
	ApproversDistinct bool `toml:"approvers_distinct"`
	// ReverifyInterval is how often the ledger's tenants are counted again
	// in every deleter (one pass per interval across every daemon of the
	// store); 0 turns re-verification off.
	ReverifyInterval Duration `toml:"reverify_interval"`
	// ReverifyRate bounds a pass: ledger tenants counted per second.
	ReverifyRate float64 `toml:"reverify_rate"`
	// Reerase: a tenant found again (a resurrection) gets a new deletion
	// job, unless it is on legal hold.
	Reerase bool `toml:"reerase"`
}

// PluginDefaults apply to every plugin block that does not override them.
type PluginDefaults struct {
	StartTimeout        Duration `toml:"start_timeout"`
	CallTimeout         Duration `toml:"call_timeout"`
	DeleteTimeout       Duration `toml:"delete_timeout"`
	ShutdownTimeout     Duration `toml:"shutdown_timeout"`
	RestartInitialDelay Duration `toml:"restart_initial_delay"`
	RestartMaxDelay     Duration `toml:"restart_max_delay"`
	// HealthInterval is how often each running plugin's store is probed
	// (the Health call); 0 turns the probes off (every store "unknown").
	// HealthTimeout bounds one probe: a store slower than that is down.
	HealthInterval Duration `toml:"health_interval"`
	HealthTimeout  Duration `toml:"health_timeout"`
	// Env lists host environment variables passed to plugins; nothing else is.
	Env []string `toml:"env"`
	// GOMAXPROCS for plugin processes; 0 leaves Go's default (all CPUs).
	// Plugins wait on their stores, and one scheduler thread saves a
	// cross-thread wake-up on every call (see docs/operations.md).
	GOMAXPROCS int `toml:"gomaxprocs"`
	// MaxMessageBytes is the gRPC message limit of plugin connections, both
	// ways: a fetch batch and a republish call are cut below it, and a
	// single message over it fails alone. It takes effect when a plugin
	// starts.
	MaxMessageBytes int `toml:"max_message_bytes"`
}

// PluginInstance is one [[deleter]] or [[dlq_source]] block.
type PluginInstance struct {
	Name   string `toml:"name"`
	Plugin string `toml:"plugin"`
	// Path overrides plugin_dir/lifecycled-plugin-<plugin>.
	Path            string         `toml:"path"`
	SHA256          string         `toml:"sha256"`
	StartTimeout    Duration       `toml:"start_timeout"`
	CallTimeout     Duration       `toml:"call_timeout"`
	DeleteTimeout   Duration       `toml:"delete_timeout"`
	ShutdownTimeout Duration       `toml:"shutdown_timeout"`
	Config          map[string]any `toml:"config"`
	resolved        map[string]any // Config with *_file keys replaced by the secrets they name
}

// PluginConfig is the config to send to the plugin: the [*.config] table with
// every `x_file = "path"` replaced by `x = "<file content>"`.
func (p *PluginInstance) PluginConfig() map[string]any {
	if p.resolved != nil {
		return p.resolved
	}
	if p.Config == nil {
		return map[string]any{}
	}
	return p.Config
}

// Duration is a time.Duration written as a string ("30s", "72h").
// Parsing is deferred to validation so that every bad value is reported
// together with its line instead of the first one aborting the load.
type Duration struct {
	time.Duration
	raw string
	set bool
}

// D builds a Duration from a time.Duration.
func D(d time.Duration) Duration { return Duration{Duration: d, raw: d.String(), set: true} }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	d.raw = string(b)
	d.set = true
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) {
	if d.raw != "" {
		return []byte(d.raw), nil
	}
	return []byte(d.Duration.String()), nil
}

func (d *Duration) parse() error {
	if !d.set {
		return nil
	}
	v, err := time.ParseDuration(d.raw)
	if err != nil {
		if _, numErr := strconv.ParseFloat(d.raw, 64); numErr == nil && d.raw != "0" {
			return fmt.Errorf("want a duration string such as \"30s\", got the number %s without a unit", d.raw)
		}
		return fmt.Errorf("invalid duration %q (use a number with a unit, e.g. \"30s\", \"72h\")", d.raw)
	}
	d.Duration = v
	return nil
}

// Kind names what a plugin instance does for the daemon.
type Kind string

// Plugin kinds.
const (
	KindDeleter   Kind = "deleter"
	KindDLQSource Kind = "dlq_source"
)

// Defaults returns a Config holding every default value. Load starts from it.
func Defaults() Config {
	return Config{
		Version: CurrentVersion,
		Daemon: Daemon{
			State:           "sqlite:///var/lib/lifecycled/lifecycled.db",
			PluginDir:       "/usr/lib/lifecycled/plugins",
			ShutdownTimeout: D(30 * time.Second),
			TenantIDFormat:  "uuid",
			LogLevel:        "info",
			LogFormat:       "auto",
		},
		Admin: Admin{
			Listen:     "unix:///run/lifecycled/admin.sock",
			SocketMode: "0660",
		},
		Retry: Retry{
			Enabled:      true,
			MaxRetries:   3,
			InitialDelay: D(time.Minute),
			Multiplier:   2.0,
			MaxDelay:     D(time.Hour),
			Jitter:       "full",
			PollInterval: D(time.Second),
			Lease:        D(time.Minute),
		},
		DLQ: DLQ{
			AutoPauseReturns: 100,
			AutoPauseWindow:  D(10 * time.Minute),
		},
		Archive: Archive{
			Enabled:          true,
			Interval:         D(time.Hour),
			Retention:        D(720 * time.Hour),
			ArchiveRetention: D(8760 * time.Hour),
			BatchSize:        1000,
		},
		Idempotency: Idempotency{
			TTL:            D(72 * time.Hour),
			MismatchStatus: 409,
			LockTimeout:    D(5 * time.Minute),
		},
		Deletion: Deletion{
			Concurrency:       4,
			RetryInitialDelay: D(30 * time.Second),
			RetryMaxDelay:     D(30 * time.Minute),
			Verify:            true,
			PollInterval:      D(time.Second),
			Lease:             D(30 * time.Second),
			GracePeriod:       D(0),
			MaxJobs:           4,
			ReverifyInterval:  D(24 * time.Hour),
			ReverifyRate:      10,
		},
		Plugins: PluginDefaults{
			StartTimeout:        D(10 * time.Second),
			CallTimeout:         D(30 * time.Second),
			DeleteTimeout:       D(6 * time.Hour),
			ShutdownTimeout:     D(5 * time.Second),
			RestartInitialDelay: D(time.Second),
			RestartMaxDelay:     D(time.Minute),
			HealthInterval:      D(15 * time.Second),
			HealthTimeout:       D(5 * time.Second),
			GOMAXPROCS:          1,
			MaxMessageBytes:     host.DefaultMaxMessageBytes,
		},
	}
}

// Secret returns the content of a *_file secret that Load resolved, by the
// dotted key of the *_file setting ("daemon.state_password_file").
func (c *Config) Secret(key string) (string, bool) {
	s, ok := c.secrets[key]
	return s, ok
}

// Instances returns every plugin block with its kind, deleters first.
func (c *Config) Instances() []Instance {
	out := make([]Instance, 0, len(c.Deleters)+len(c.DLQSources))
	for i := range c.Deleters {
		out = append(out, Instance{Kind: KindDeleter, PluginInstance: c.Deleters[i]})
	}
	for i := range c.DLQSources {
		out = append(out, Instance{Kind: KindDLQSource, PluginInstance: c.DLQSources[i]})
	}
	return out
}

// Instance is a plugin block together with its kind.
type Instance struct {
	Kind Kind
	PluginInstance
}
