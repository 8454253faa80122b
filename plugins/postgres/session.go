package main

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/lifecycled/lifecycled/sdk"
)

// pinnedSettings are the session settings that change what a delete does,
// with the value every connection of the deleter runs under.
// session_replication_role = replica (from a DSN's options, ALTER ROLE or
// ALTER DATABASE) switches off every foreign key action and every ordinary
// trigger: cascades never run, and the erasure would leave their rows.
var pinnedSettings = map[string]string{"session_replication_role": "origin"}

// sessionGuard pins pinnedSettings on every new connection and remembers
// what each setting was before (for the plan and its fingerprint: an
// approved plan must not apply unchanged under other settings). Where a
// setting cannot be pinned (the role may not change it), the connection,
// and so the deleter, is refused.
type sessionGuard struct {
	mu   sync.Mutex
	seen map[string]string
}

func (g *sessionGuard) afterConnect(ctx context.Context, conn *pgx.Conn) error {
	names := make([]string, 0, len(pinnedSettings))
	for n := range pinnedSettings {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		want := pinnedSettings[name]
		var found string
		if err := conn.QueryRow(ctx, `SELECT current_setting($1)`, name).Scan(&found); err != nil {
			return fmt.Errorf("read %s: %w", name, err)
		}
		g.mu.Lock()
		if g.seen == nil {
			g.seen = map[string]string{}
		}
		g.seen[name] = found
		g.mu.Unlock()
		if found == want {
			continue
		}
		if _, err := conn.Exec(ctx, `SELECT set_config($1, $2, false)`, name, want); err != nil {
			return sdk.Permanent(fmt.Errorf("the session starts with %s = %s (from the DSN's options, ALTER ROLE or ALTER DATABASE), "+
				"under which foreign key actions and triggers do not run, and the deleter's role cannot set it to %s: %v; "+
				"remove the setting, or connect as a role that may set it", name, found, want, err))
		}
	}
	return nil
}

// found returns what the settings were before the guard pinned them, on
// the connections made so far.
func (g *sessionGuard) found() map[string]string {
	out := map[string]string{}
	if g == nil {
		return out
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, v := range g.seen {
		out[k] = v
	}
	return out
}

// settingLines are the settings for the plan's fingerprint and notes.
func settingLines(found map[string]string) []string {
	var lines []string
	for name, want := range pinnedSettings {
		lines = append(lines, fmt.Sprintf("session %s found %q pinned %q", name, found[name], want))
	}
	sort.Strings(lines)
	return lines
}
