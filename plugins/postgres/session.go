package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/lifecycled/lifecycled/sdk"
)

// pin is a session setting that changes what a delete does, and the value
// every connection of the deleter runs under, given the value it found.
type pin struct {
	name string
	want func(found string) string
	why  string
}

// pins are the settings the deleter sets on every connection:
//
//   - session_replication_role = replica (from a DSN's options, ALTER ROLE
//     or ALTER DATABASE) switches off every foreign key action and every
//     ordinary trigger: cascades never run;
//   - client_encoding other than UTF8 makes the server read the tenant id's
//     UTF-8 bytes as another encoding: erasing "café" erased "cafÃ©";
//   - search_path: a schema ahead of pg_catalog can define its own = for
//     text, under which "= $1" is another comparison (case-insensitive:
//     erasing "acme" erased "ACME"). pg_catalog goes first; the rest of the
//     path stays, for extension types such as citext.
var pins = []pin{
	{name: "session_replication_role", want: func(string) string { return "origin" },
		why: "under which foreign key actions and triggers do not run"},
	{name: "client_encoding", want: func(string) string { return "UTF8" },
		why: "under which the server reads the tenant id's bytes as another encoding"},
	{name: "search_path", want: catalogFirst,
		why: "under which an operator of another schema could decide what = means"},
}

// catalogFirst is a search_path with pg_catalog searched first. A path
// that does not name pg_catalog already searches it first, implicitly,
// and is left as it is; one that names it later has it moved to the head.
func catalogFirst(path string) string {
	var rest []string
	named := false
	for _, p := range strings.Split(path, ",") {
		switch p = strings.TrimSpace(p); p {
		case "":
		case "pg_catalog", `"pg_catalog"`:
			named = true
		default:
			rest = append(rest, p)
		}
	}
	if !named {
		return path
	}
	return strings.Join(append([]string{"pg_catalog"}, rest...), ", ")
}

// sessionGuard pins the settings on every new connection and remembers
// what each was before (for the plan and its fingerprint: an approved plan
// must not apply unchanged under other settings). Where a setting cannot
// be pinned (the role may not change it), the connection, and so the
// deleter, is refused.
type sessionGuard struct {
	mu   sync.Mutex
	seen map[string]string
}

func (g *sessionGuard) afterConnect(ctx context.Context, conn *pgx.Conn) error {
	for _, p := range pins {
		var found string
		if err := conn.QueryRow(ctx, `SELECT current_setting($1)`, p.name).Scan(&found); err != nil {
			return fmt.Errorf("read %s: %w", p.name, err)
		}
		g.mu.Lock()
		if g.seen == nil {
			g.seen = map[string]string{}
		}
		g.seen[p.name] = found
		g.mu.Unlock()
		want := p.want(found)
		if found == want {
			continue
		}
		if _, err := conn.Exec(ctx, `SELECT set_config($1, $2, false)`, p.name, want); err != nil {
			return sdk.Permanent(fmt.Errorf("the session starts with %s = %s (from the DSN, ALTER ROLE or ALTER DATABASE), "+
				"%s, and the deleter's role cannot set it to %s: %v; remove the setting, or connect as a role that may set it", p.name, found, p.why, want, err))
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

// settingLines are the settings for the plan's fingerprint.
func settingLines(found map[string]string) []string {
	var lines []string
	for _, p := range pins {
		lines = append(lines, fmt.Sprintf("session %s found %q pinned %q", p.name, found[p.name], p.want(found[p.name])))
	}
	sort.Strings(lines)
	return lines
}

// settingNotes are the settings the deleter changed, for the plan's notes.
func settingNotes(found map[string]string) []string {
	var notes []string
	for _, p := range pins {
		if f, ok := found[p.name]; ok && f != p.want(f) {
			notes = append(notes, fmt.Sprintf("sessions start with %s = %s; the deleter sets it to %s on every connection", p.name, f, p.want(f)))
		}
	}
	return notes
}
