package adminapi

import (
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/pluginhost"
)

// PluginJSON is one plugin in GET /api/v1/plugins.
type PluginJSON struct {
	Name       string     `json:"name"`
	Kind       string     `json:"kind"`
	Plugin     string     `json:"plugin"`
	Path       string     `json:"path"`
	SHA256     string     `json:"sha256"`
	Version    string     `json:"version"`
	State      string     `json:"state"`
	Restarts   int        `json:"restarts"`
	LastError  string     `json:"last_error"`
	StderrTail []string   `json:"stderr_tail"`
	PID        int        `json:"pid,omitempty"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	Warnings   []string   `json:"warnings,omitempty"`
}

// PluginsBody is GET /api/v1/plugins.
type PluginsBody struct {
	Plugins []PluginJSON `json:"plugins"`
}

func pluginJSON(p pluginhost.Info) PluginJSON {
	tail := p.StderrTail
	if tail == nil {
		tail = []string{} // an empty list, not null: there is nothing on stderr
	}
	return PluginJSON{Name: p.Name, Kind: p.Kind, Plugin: p.Plugin, Path: p.Path, SHA256: p.SHA256, Version: p.Version,
		State: string(p.State), Restarts: p.Restarts, LastError: p.LastError, StderrTail: tail, PID: p.PID,
		StartedAt: p.StartedAt, Warnings: p.Warnings}
}
