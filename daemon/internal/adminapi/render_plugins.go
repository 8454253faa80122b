package adminapi

import (
	"github.com/lifecycled/lifecycled/daemon/internal/pluginhost"
	"github.com/lifecycled/lifecycled/daemon/wire"
)

func pluginJSON(p pluginhost.Info) wire.Plugin {
	tail := p.StderrTail
	if tail == nil {
		tail = []string{} // an empty list, not null: there is nothing on stderr
	}
	return wire.Plugin{Name: p.Name, Kind: p.Kind, Plugin: p.Plugin, Path: p.Path, SHA256: p.SHA256, Version: p.Version,
		State: string(p.State), Restarts: p.Restarts, LastError: p.LastError, StderrTail: tail, PID: p.PID,
		StartedAt: p.StartedAt, Warnings: p.Warnings, Store: storeJSON(p.Store)}
}

func storeJSON(h pluginhost.StoreHealth) wire.StoreHealth {
	out := wire.StoreHealth{State: string(h.State), Error: h.Error}
	if h.Since != nil {
		s := formatTime(*h.Since)
		out.Since = &s
	}
	if h.CheckedAt != nil {
		s := formatTime(*h.CheckedAt)
		out.CheckedAt = &s
	}
	return out
}
