package e2e

import (
	"fmt"
	"strings"
)

// postgresBlockIgnoring is postgresBlock with ignore_tables: the postgres
// deleter's drift gate refuses a tables list that leaves out a table with
// the tenant column, so blocks that split one database's tables list each
// other's tables there.
func postgresBlockIgnoring(name, dsn string, ignore []string, tables ...string) string {
	quoted := make([]string, len(ignore))
	for i, t := range ignore {
		quoted[i] = fmt.Sprintf("%q", t)
	}
	return postgresBlock(name, dsn, tables...) + "ignore_tables = [" + strings.Join(quoted, ", ") + "]\n"
}
