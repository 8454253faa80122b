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

// pinnedSession are the session variables that change what a delete does,
// with the value the deleter sets on every connection (go-sql-driver runs
// SET for each DSN parameter it does not know, after the server's
// init_connect):
//
//   - foreign_key_checks = 0 lets a delete leave another tenant's row
//     pointing at nothing, and turns off cascades;
//   - sql_mode: PAD_CHAR_TO_FULL_LENGTH makes a CHAR column read back
//     padded, so a byte comparison with the tenant id matches nothing;
//     other modes change how values compare and convert. The deleter runs
//     under one mode of its own.
var pinnedSession = map[string]string{
	"foreign_key_checks": "1",
	"sql_mode":           "STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION",
}

// sessionSettings are the pinned variables as the deleter found them: what
// the DSN asked for, the server's global value, and what a connection of
// the deleter has.
type sessionSettings struct {
	asked, global, session map[string]string
}

// pinSession sets the pinned variables in mcfg's parameters, over what
// the DSN asked for, and returns what it asked for.
func pinSession(mcfg *mysql.Config) map[string]string {
	asked := map[string]string{}
	if mcfg.Params == nil {
		mcfg.Params = map[string]string{}
	}
	for k, v := range mcfg.Params {
		for name := range pinnedSession {
			if strings.EqualFold(k, name) {
				asked[name] = v
				delete(mcfg.Params, k)
			}
		}
	}
	mcfg.Params["foreign_key_checks"] = pinnedSession["foreign_key_checks"]
	mcfg.Params["sql_mode"] = "'" + pinnedSession["sql_mode"] + "'"
	return asked
}

// readSession reads the pinned variables of one of the deleter's
// connections and of the server, and refuses a connection on which they
// are not what the deleter set (a proxy that drops SETs, a server that
// rewrites them).
func readSession(ctx context.Context, db *sql.DB) (sessionSettings, error) {
	s := sessionSettings{global: map[string]string{}, session: map[string]string{}}
	var fkc, mode, gfkc, gmode string
	if err := db.QueryRowContext(ctx, `SELECT @@SESSION.foreign_key_checks, @@SESSION.sql_mode, @@GLOBAL.foreign_key_checks, @@GLOBAL.sql_mode`).
		Scan(&fkc, &mode, &gfkc, &gmode); err != nil {
		return s, classify(fmt.Errorf("read the session's settings: %w", err))
	}
	s.session["foreign_key_checks"], s.session["sql_mode"] = fkc, mode
	s.global["foreign_key_checks"], s.global["sql_mode"] = gfkc, gmode
	for name, want := range pinnedSession {
		if !strings.EqualFold(s.session[name], want) {
			return s, sdk.Permanent(fmt.Errorf("the deleter's sessions run with %s = %q although it set %q: deletes would not mean what the plan says; "+
				"connect without a proxy or setting that overrides session variables", name, s.session[name], want))
		}
	}
	return s, nil
}

// settingLines are the pinned variables as found, for the plan's
// fingerprint: an approved plan does not apply unchanged after the DSN or
// the server's defaults changed.
func settingLines(s sessionSettings, asked map[string]string) []string {
	var lines []string
	for name, want := range pinnedSession {
		dsn, ok := asked[name]
		if !ok {
			dsn = "(not set)"
		}
		lines = append(lines, fmt.Sprintf("session %s dsn %q global %q pinned %q", name, dsn, s.global[name], want))
	}
	sort.Strings(lines)
	return lines
}
