package config

import (
	"fmt"
	"net"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/lifecycled/lifecycled/sdk/host"
)

var (
	pluginNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	sha256RE     = regexp.MustCompile(`^[0-9a-f]{64}$`)
	envNameRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

func (c *Config) validate(r *reporter) {
	if c.Version != CurrentVersion {
		r.at("version", "unsupported version %d; this lifecycled understands version %d", c.Version, CurrentVersion)
	}
	c.parseDurations(reflect.ValueOf(c).Elem(), "", r)

	// Daemon.
	if _, _, err := c.StateDSN(); err != nil {
		r.at("daemon.state", "%v", err)
	}
	if c.Daemon.PluginDir == "" {
		r.at("daemon.plugin_dir", "must not be empty")
	}
	positive(r, "daemon.shutdown_timeout", c.Daemon.ShutdownTimeout)
	if f := c.Daemon.TenantIDFormat; f != "uuid" {
		if f == "" {
			r.at("daemon.tenant_id_format", `must be "uuid" or a regular expression`)
		} else if _, err := regexp.Compile(f); err != nil {
			r.at("daemon.tenant_id_format", "invalid regular expression: %v", err)
		} else if !strings.HasPrefix(f, "^") || !strings.HasSuffix(f, "$") {
			r.at("daemon.tenant_id_format", "regular expression must be anchored with ^ and $ so that it checks the whole tenant id")
		}
	}
	switch c.Daemon.LogLevel {
	case "trace", "debug", "info", "warn", "error":
	default:
		r.at("daemon.log_level", "must be one of trace, debug, info, warn, error; got %q", c.Daemon.LogLevel)
	}
	switch c.Daemon.LogFormat {
	case "auto", "json", "text":
	default:
		r.at("daemon.log_format", "must be auto, json or text; got %q", c.Daemon.LogFormat)
	}

	// Admin.
	if _, err := c.SocketPath(); err != nil {
		r.at("admin.listen", "%v", err)
	}
	if _, err := c.SocketFileMode(); err != nil {
		r.at("admin.socket_mode", "%v", err)
	}
	if l := c.Admin.MetricsListen; l != "" {
		if err := checkLoopback(l); err != nil {
			r.at("admin.metrics_listen", "%v", err)
		}
	}

	c.validateDLQ(r)
	// Retry.
	if c.Retry.MaxRetries < 0 || c.Retry.MaxRetries > 1000 {
		r.at("retry.max_retries", "must be between 0 and 1000; got %d", c.Retry.MaxRetries)
	}
	positive(r, "retry.initial_delay", c.Retry.InitialDelay)
	positive(r, "retry.max_delay", c.Retry.MaxDelay)
	positive(r, "retry.poll_interval", c.Retry.PollInterval)
	positive(r, "retry.lease", c.Retry.Lease)
	if c.Retry.MaxDelay.Duration < c.Retry.InitialDelay.Duration {
		r.at("retry.max_delay", "must not be shorter than retry.initial_delay")
	}
	if c.Retry.Multiplier < 1 {
		r.at("retry.multiplier", "must be at least 1.0; got %v", c.Retry.Multiplier)
	}
	switch c.Retry.Jitter {
	case "none", "full", "equal":
	default:
		r.at("retry.jitter", `must be "none", "full" or "equal"; got %q`, c.Retry.Jitter)
	}

	// Archive.
	positive(r, "archive.interval", c.Archive.Interval)
	positive(r, "archive.retention", c.Archive.Retention)
	positive(r, "archive.archive_retention", c.Archive.ArchiveRetention)
	if c.Archive.BatchSize < 1 || c.Archive.BatchSize > 100000 {
		r.at("archive.batch_size", "must be between 1 and 100000; got %d", c.Archive.BatchSize)
	}

	// Idempotency.
	positive(r, "idempotency.ttl", c.Idempotency.TTL)
	positive(r, "idempotency.lock_timeout", c.Idempotency.LockTimeout)
	if s := c.Idempotency.MismatchStatus; s != 409 && s != 422 {
		r.at("idempotency.mismatch_status", "must be 409 or 422; got %d", s)
	}

	// Deletion.
	if c.Deletion.Concurrency < 1 || c.Deletion.Concurrency > 256 {
		r.at("deletion.concurrency", "must be between 1 and 256; got %d", c.Deletion.Concurrency)
	}
	positive(r, "deletion.retry_initial_delay", c.Deletion.RetryInitialDelay)
	positive(r, "deletion.retry_max_delay", c.Deletion.RetryMaxDelay)
	positive(r, "deletion.poll_interval", c.Deletion.PollInterval)
	positive(r, "deletion.lease", c.Deletion.Lease)
	if g := c.Deletion.GracePeriod.Duration; g < 0 || g > 8760*time.Hour {
		r.at("deletion.grace_period", "must be between \"0s\" and \"8760h\"; got %q", c.Deletion.GracePeriod.raw)
	}
	if c.Deletion.MaxJobs < 1 || c.Deletion.MaxJobs > 256 {
		r.at("deletion.max_jobs", "must be between 1 and 256; got %d", c.Deletion.MaxJobs)
	}
	if iv := c.Deletion.ReverifyInterval.Duration; iv != 0 && (iv < time.Second || iv > 8760*time.Hour) {
		r.at("deletion.reverify_interval", "must be \"0s\" (off) or between \"1s\" and \"8760h\"; got %q", c.Deletion.ReverifyInterval.raw)
	}
	if rt := c.Deletion.ReverifyRate; !(rt > 0 && rt <= 100000) {
		r.at("deletion.reverify_rate", "must be above 0 and at most 100000 (tenants per second); got %v", rt)
	}

	// Plugins.
	positive(r, "plugins.start_timeout", c.Plugins.StartTimeout)
	positive(r, "plugins.call_timeout", c.Plugins.CallTimeout)
	positive(r, "plugins.delete_timeout", c.Plugins.DeleteTimeout)
	positive(r, "plugins.shutdown_timeout", c.Plugins.ShutdownTimeout)
	positive(r, "plugins.restart_initial_delay", c.Plugins.RestartInitialDelay)
	positive(r, "plugins.restart_max_delay", c.Plugins.RestartMaxDelay)
	if d := c.Plugins.HealthInterval.Duration; d != 0 && (d < time.Second || d > time.Hour) {
		r.at("plugins.health_interval", "must be \"0s\" (no probes) or between \"1s\" and \"1h\"; got %q", c.Plugins.HealthInterval.raw)
	}
	if d := c.Plugins.HealthTimeout.Duration; d < 100*time.Millisecond || d > time.Minute {
		r.at("plugins.health_timeout", "must be between \"100ms\" and \"1m\"; got %q", c.Plugins.HealthTimeout.raw)
	}
	if c.Plugins.GOMAXPROCS < 0 || c.Plugins.GOMAXPROCS > 1024 {
		r.at("plugins.gomaxprocs", "must be between 0 (Go's default) and 1024; got %d", c.Plugins.GOMAXPROCS)
	}
	if n := c.Plugins.MaxMessageBytes; n < host.MinMaxMessageBytes || n > host.MaxMaxMessageBytes {
		r.at("plugins.max_message_bytes", "must be between %d (4 MiB) and %d (1 GiB); got %d", host.MinMaxMessageBytes, host.MaxMaxMessageBytes, n)
	}
	for i, e := range c.Plugins.Env {
		if !envNameRE.MatchString(e) {
			r.at(fmt.Sprintf("plugins.env.%d", i), "not an environment variable name: %q", e)
		}
	}
	names := map[string]string{}
	for kind, list := range map[string][]PluginInstance{"deleter": c.Deleters, "dlq_source": c.DLQSources} {
		for i, p := range list {
			key := fmt.Sprintf("%s.%d", kind, i)
			switch {
			case p.Name == "":
				r.at(key+".name", "must not be empty")
			case strings.ContainsAny(p.Name, " \t\n/"):
				r.at(key+".name", "must not contain spaces or '/'; got %q", p.Name)
			default:
				if prev, dup := names[p.Name]; dup {
					r.at(key+".name", "duplicate name %q (also used by %s); names must be unique across [[deleter]] and [[dlq_source]]", p.Name, prev)
				}
				names[p.Name] = key
			}
			if p.Plugin == "" && p.Path == "" {
				r.at(key+".plugin", "must name a plugin (runs lifecycled-plugin-<plugin> from plugin_dir) or set path")
			} else if p.Plugin != "" && !pluginNameRE.MatchString(p.Plugin) {
				r.at(key+".plugin", "must be lowercase letters, digits, '-' or '_'; got %q", p.Plugin)
			}
			if p.SHA256 != "" && !sha256RE.MatchString(strings.ToLower(p.SHA256)) {
				r.at(key+".sha256", "must be 64 hex digits (see `lifecycled plugins checksum PATH`)")
			}
		}
	}
}

// parseDurations parses every Duration field and reports bad ones.
func (c *Config) parseDurations(v reflect.Value, key string, r *reporter) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == durationType {
			if err := v.Addr().Interface().(*Duration).parse(); err != nil {
				r.at(key, "%v", err)
			}
			return
		}
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("toml")
			if !f.IsExported() || tag == "-" {
				continue
			}
			c.parseDurations(v.Field(i), joinKey(key, tag), r)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			c.parseDurations(v.Index(i), fmt.Sprintf("%s.%d", key, i), r)
		}
	}
}

func positive(r *reporter, key string, d Duration) {
	if d.Duration <= 0 {
		r.at(key, "must be a positive duration; got %q", d.raw)
	}
}

// StateKind is the state store backend named by daemon.state.
type StateKind string

// State store kinds.
const (
	StateSQLite   StateKind = "sqlite"
	StatePostgres StateKind = "postgres"
)

// StateDSN returns the state store kind and the DSN to open it: a file path
// for SQLite (relative paths anchored at the config's directory), a URL for
// PostgreSQL with the password from state_password_file filled in.
func (c *Config) StateDSN() (StateKind, string, error) {
	s := c.Daemon.State
	switch {
	case strings.HasPrefix(s, "sqlite://"):
		p := strings.TrimPrefix(s, "sqlite://")
		if p == "" {
			return "", "", fmt.Errorf("sqlite:// needs a file path, e.g. sqlite://./var/lifecycled.db")
		}
		return StateSQLite, c.resolvePath(p), nil
	case strings.HasPrefix(s, "postgres://"), strings.HasPrefix(s, "postgresql://"):
		u, err := url.Parse(s)
		if err != nil {
			return "", "", fmt.Errorf("invalid PostgreSQL URL: %v", redactURLError(err))
		}
		if pw, ok := c.secrets["daemon.state_password_file"]; ok {
			user := ""
			if u.User != nil {
				user = u.User.Username()
			}
			u.User = url.UserPassword(user, pw)
		}
		return StatePostgres, u.String(), nil
	default:
		return "", "", fmt.Errorf(`must start with "sqlite://" or "postgres://"; got %q`, RedactURL(s))
	}
}

// SocketPath returns the filesystem path of the admin socket.
func (c *Config) SocketPath() (string, error) {
	l := c.Admin.Listen
	if !strings.HasPrefix(l, "unix://") {
		return "", fmt.Errorf(`must be unix://PATH (the admin API listens on a Unix socket only; use metrics_listen for TCP scrapes); got %q`, l)
	}
	p := strings.TrimPrefix(l, "unix://")
	if p == "" {
		return "", fmt.Errorf("unix:// needs a socket path")
	}
	if len(p) > 100 {
		// sun_path is 108 bytes; leave room for the resolved prefix.
		return "", fmt.Errorf("socket path too long (%d bytes; Unix sockets allow about 107)", len(p))
	}
	return c.resolvePath(p), nil
}

// SocketFileMode parses admin.socket_mode.
func (c *Config) SocketFileMode() (uint32, error) {
	m, err := strconv.ParseUint(c.Admin.SocketMode, 8, 32)
	if err != nil || m > 0o777 {
		return 0, fmt.Errorf("must be an octal mode such as \"0660\"; got %q", c.Admin.SocketMode)
	}
	if m&0o007 != 0 {
		return 0, fmt.Errorf("must not give access to others (%s): socket access equals admin rights", c.Admin.SocketMode)
	}
	return uint32(m), nil
}

func checkLoopback(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("must be host:port; got %q", addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("invalid port %q", port)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("must be a loopback address (127.0.0.1 or [::1]); it serves metrics without authentication; got %q", host)
	}
	return nil
}

func redactURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return fmt.Errorf("%s: %v", ue.Op, ue.Err)
	}
	return err
}
