package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"

	"github.com/go-sql-driver/mysql"

	"github.com/lifecycled/lifecycled/sdk"
)

// information_schema lists only the tables, columns, keys and triggers of
// tables the user holds some privilege on. A user granted some tables of a
// database (table-level grants) sees the database's other tables as if
// they did not exist: the preflight cannot check the keys they declare (a
// cascade into another tenant's row goes unseen) nor the proof count the
// tenant's rows in them. So the deleter needs SELECT on whole databases:
// globally, on the database, or through a role.

// probeTable is a table no database has: reading it tells a user who may
// read the whole database (1146, no such table) from one who may not
// (1142, SELECT command denied), whichever way the privilege was granted.
const probeTable = "lcd_visibility_probe_8c1f2e"

// checkWholeSchemas refuses when the user cannot read some database of
// schemas as a whole.
func checkWholeSchemas(ctx context.Context, db *sql.DB, schemas map[string]bool) error {
	var names []string
	for s := range schemas {
		names = append(names, s)
	}
	sort.Strings(names)
	var problems []sdk.FieldError
	for _, s := range names {
		_, err := db.ExecContext(ctx, fmt.Sprintf("SELECT 1 FROM %s.%s LIMIT 0", quoteIdent(s), quoteIdent(probeTable)))
		var me *mysql.MySQLError
		switch {
		case err == nil, errors.As(err, &me) && me.Number == 1146:
		case errors.As(err, &me) && (me.Number == 1142 || me.Number == 1044):
			problems = append(problems, sdk.FieldError{Field: "dsn", Problem: fmt.Sprintf(
				"the user may read only some tables of database %s (table-level grants), and information_schema hides the others, with the keys they declare and "+
					"the tenant's rows they hold: the preflight and the proof could not check them; GRANT SELECT ON %s.* to the deleter's user (and DELETE on the tables it erases)",
				s, quoteIdent(s))})
		default:
			return classify(fmt.Errorf("check which tables of %s the user can see: %w", s, err))
		}
	}
	if len(problems) > 0 {
		return sdk.InvalidConfig(problems...)
	}
	return nil
}
