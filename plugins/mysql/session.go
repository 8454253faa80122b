package main

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/lifecycled/lifecycled/sdk"
)

// pin is a session variable that changes what a delete or a catalogue read
// means, the value the deleter sets on every connection (go-sql-driver runs
// one SET for the DSN parameters it does not know, after the server's
// init_connect and the charset's SET NAMES), and how to recognise it when
// read back.
type pin struct {
	name    string
	set     string // the SQL the SET assigns
	want    string // @@SESSION.name as read back
	mariadb bool   // MariaDB only
}

// pins, and why each:
//
//   - foreign_key_checks = 0 lets a delete leave another tenant's row
//     pointing at nothing, and turns off cascades;
//   - sql_mode: PAD_CHAR_TO_FULL_LENGTH makes a CHAR column read back
//     padded, so a byte comparison with the tenant id matches nothing;
//     other modes change how values compare and convert. The deleter runs
//     under one mode of its own;
//   - sql_select_limit cuts every SELECT short, the catalogue's too: keys
//     and tables past the limit vanish from the preflight and the proof;
//   - the character sets: with character_set_client latin1 the server
//     reads the tenant id's UTF-8 bytes as latin1 ("café" becomes
//     "cafÃ©", another tenant);
//   - autocommit = 0 leaves every batch in one transaction never
//     committed;
//   - system_versioning_asof (MariaDB) makes every read see versioned
//     tables as of another time: Count and the preflight see nothing.
var pins = []pin{
	{name: "foreign_key_checks", set: "1", want: "1"},
	{name: "sql_mode", set: "'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'", want: "STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION"},
	{name: "sql_select_limit", set: "DEFAULT", want: "18446744073709551615"},
	{name: "character_set_client", set: "utf8mb4", want: "utf8mb4"},
	{name: "character_set_connection", set: "utf8mb4", want: "utf8mb4"},
	{name: "character_set_results", set: "utf8mb4", want: "utf8mb4"},
	{name: "autocommit", set: "1", want: "1"},
	{name: "system_versioning_asof", set: "DEFAULT", want: "DEFAULT", mariadb: true},
}

func pinsFor(mariadb bool) []pin {
	var out []pin
	for _, p := range pins {
		if !p.mariadb || mariadb {
			out = append(out, p)
		}
	}
	return out
}

// sessionSettings are the pinned variables as the deleter found them: what
// the DSN asked for, the server's global value, and what a connection of
// the deleter has.
type sessionSettings struct {
	global, session map[string]string
}

// pinSession sets the pinned variables in mcfg's parameters, over what the
// DSN asked for, and returns what it asked for.
func pinSession(mcfg *mysql.Config, mariadb bool) map[string]string {
	asked := map[string]string{}
	if mcfg.Params == nil {
		mcfg.Params = map[string]string{}
	}
	for _, p := range pinsFor(mariadb) {
		for k, v := range mcfg.Params {
			if strings.EqualFold(k, p.name) {
				asked[p.name] = v
				delete(mcfg.Params, k)
			}
		}
		mcfg.Params[p.name] = p.set
	}
	return asked
}

// readSession reads the pinned variables of one of the deleter's
// connections and of the server, and refuses a connection on which they
// are not what the deleter set (a proxy that drops SETs, a server that
// rewrites them).
func readSession(ctx context.Context, db *sql.DB, mariadb bool) (sessionSettings, error) {
	s := sessionSettings{global: map[string]string{}, session: map[string]string{}}
	ps := pinsFor(mariadb)
	var cols []string
	for _, p := range ps {
		cols = append(cols, "CAST(@@SESSION."+p.name+" AS CHAR)", "CAST(@@GLOBAL."+p.name+" AS CHAR)")
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := db.QueryRowContext(ctx, "SELECT "+strings.Join(cols, ", ")).Scan(ptrs...); err != nil {
		return s, classify(fmt.Errorf("read the session's settings: %w", err))
	}
	for i, p := range ps {
		s.session[p.name], s.global[p.name] = vals[2*i].String, vals[2*i+1].String
		if !strings.EqualFold(boolText(s.session[p.name]), p.want) {
			return s, sdk.Permanent(fmt.Errorf("the deleter's sessions run with %s = %q although it set %s: deletes would not mean what the plan says; "+
				"connect without a proxy or setting that overrides session variables", p.name, s.session[p.name], p.set))
		}
	}
	return s, nil
}

// settingLines are the pinned variables as found, for the plan's
// fingerprint: an approved plan does not apply unchanged after the DSN or
// the server's defaults changed.
func settingLines(s sessionSettings, asked map[string]string) []string {
	var lines []string
	for _, p := range pins {
		g, known := s.global[p.name]
		if !known {
			continue // not this server's (system_versioning_asof on MySQL)
		}
		dsn, ok := asked[p.name]
		if !ok {
			dsn = "(not set)"
		}
		lines = append(lines, fmt.Sprintf("session %s dsn %q global %q pinned %q", p.name, dsn, g, p.set))
	}
	sort.Strings(lines)
	return lines
}

// settingNotes are what the DSN asked for that the deleter overrode.
func settingNotes(asked map[string]string) []string {
	var notes []string
	for _, p := range pins {
		if v, ok := asked[p.name]; ok && !strings.EqualFold(strings.Trim(v, "'"), strings.Trim(p.set, "'")) {
			notes = append(notes, fmt.Sprintf("the DSN sets %s = %s; the deleter sets it to %s on every connection", p.name, v, strings.Trim(p.set, "'")))
		}
	}
	return notes
}

// boolText reads a boolean variable as 1 or 0, as MySQL and MariaDB show it
// either way (1, ON).
func boolText(v string) string {
	switch strings.ToUpper(v) {
	case "ON":
		return "1"
	case "OFF":
		return "0"
	}
	return v
}
