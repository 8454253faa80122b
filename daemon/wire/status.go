package wire

import (
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/buildinfo"
)

// Status is GET /api/v1/status: one look at the daemon for operators.
type Status struct {
	Version       buildinfo.Info  `json:"version"`
	StartedAt     string          `json:"started_at"`
	UptimeSeconds int64           `json:"uptime_seconds"`
	Ready         bool            `json:"ready"`
	Degraded      []string        `json:"degraded"`
	StateStore    StoreStatus     `json:"state_store"`
	Plugins       []PluginSummary `json:"plugins"`
	DLQ           DLQSummary      `json:"dlq"`
}

// StoreStatus is the state store's part of the status.
type StoreStatus struct {
	Dialect string `json:"dialect"`
	OK      bool   `json:"ok"`
	Error   string `json:"error,omitempty"`
}

// PluginSummary is a plugin's part of the status.
type PluginSummary struct {
	Name      string      `json:"name"`
	Kind      string      `json:"kind"`
	State     string      `json:"state"`
	Restarts  int         `json:"restarts"`
	LastError string      `json:"last_error,omitempty"`
	Store     StoreHealth `json:"store"`
}

// StoreHealth is a plugin's store as the last probe (the plugin's Health
// call) found it: state "up", "down" or "unknown" (not probed yet, the
// plugin not running, probes off, or a plugin without Health), why when
// not up, since when in that state and when last probed.
type StoreHealth struct {
	State     string  `json:"state"`
	Error     string  `json:"error,omitempty"`
	Since     *string `json:"since"`
	CheckedAt *string `json:"checked_at"`
}

// DLQSummary totals the dead-letter queues. When the state store
// cannot say, Counts is null and Error says why: "PENDING 0" would claim
// there is nothing waiting.
type DLQSummary struct {
	Topics          int              `json:"topics"`
	Counts          map[string]int64 `json:"counts"`
	OldestPendingAt *string          `json:"oldest_pending_at"`
	Error           string           `json:"error,omitempty"`
}

// ReloadResult is POST /api/v1/reload's answer.
type ReloadResult struct {
	Reloaded bool   `json:"reloaded"`
	Message  string `json:"message"`
}

// Plugin is one plugin in GET /api/v1/plugins.
type Plugin struct {
	Name       string      `json:"name"`
	Kind       string      `json:"kind"`
	Plugin     string      `json:"plugin"`
	Path       string      `json:"path"`
	SHA256     string      `json:"sha256"`
	Version    string      `json:"version"`
	State      string      `json:"state"`
	Restarts   int         `json:"restarts"`
	LastError  string      `json:"last_error"`
	StderrTail []string    `json:"stderr_tail"`
	PID        int         `json:"pid,omitempty"`
	StartedAt  *time.Time  `json:"started_at,omitempty"`
	Warnings   []string    `json:"warnings,omitempty"`
	Store      StoreHealth `json:"store"`
}

// Plugins is GET /api/v1/plugins.
type Plugins struct {
	Plugins []Plugin `json:"plugins"`
}
