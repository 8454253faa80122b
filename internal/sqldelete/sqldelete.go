// Package sqldelete is what the SQL deleter plugins (postgres and mysql)
// share on their side of the protocol: the configuration both accept, the
// checks that do not depend on the dialect, and the tally of a Delete. The
// dialects' differences stay in the plugins.
package sqldelete

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/lifecycled/lifecycled/internal/fkgraph"
	"github.com/lifecycled/lifecycled/sdk"
)

// Config is the configuration both SQL deleters accept; each embeds it
// beside its own fields, so the keys and their meanings cannot drift apart.
type Config struct {
	DSN          string `json:"dsn"`
	Password     string `json:"password"`
	TenantColumn string `json:"tenant_column"`
	// TenantColumns overrides the tenant column per table ("companies" =
	// "id" when the tenants table is keyed by its own id).
	TenantColumns map[string]string `json:"tenant_columns"`
	Tables        []string          `json:"tables"`
	// IgnoreTables are tables with the tenant column that are kept on
	// purpose (audit logs, another application's data): the independent
	// proof reports their tenant rows as kept instead of left, discover
	// leaves them out, and PostgreSQL's drift gate lets them be although
	// they have the tenant column or reference a listed table.
	IgnoreTables     []string `json:"ignore_tables"`
	Discover         bool     `json:"discover"`
	Schemas          []string `json:"schemas"`
	BatchSize        int      `json:"batch_size"`
	LockTimeout      string   `json:"lock_timeout"`
	StatementTimeout string   `json:"statement_timeout"`
	// AcknowledgedHooks names, as "schema.table.name" (in MySQL a schema
	// is a database), the BEFORE DELETE triggers (and PostgreSQL's DELETE
	// rules) on tables the erasure reaches that the operator has looked
	// at: such a hook can keep or redirect the rows a delete removes, so
	// any other is refused. The independent proof still decides whether
	// the erasure is verified.
	AcknowledgedHooks []string `json:"acknowledged_hooks"`
	// GlobalRows: rows whose tenant column is NULL are shared by every
	// tenant, never deleted and never another tenant's (a row linking
	// this tenant's row to a global one is this tenant's). Default true.
	GlobalRows *bool `json:"global_rows"`
}

// KeepsGlobalRows is GlobalRows with its default.
func (c Config) KeepsGlobalRows() bool { return c.GlobalRows == nil || *c.GlobalRows }

// TenantColumnNames are every column name a table may hold tenant ids in.
func (c Config) TenantColumnNames() []string {
	out := []string{c.TenantColumn}
	for _, col := range c.TenantColumns {
		out = append(out, col)
	}
	return out
}

// SchemaSet is Schemas as a set, for discover's look-ups.
func (c Config) SchemaSet() map[string]bool {
	in := map[string]bool{}
	for _, s := range c.Schemas {
		in[s] = true
	}
	return in
}

// TenantColumnProblems are what is wrong with tenant_column and
// tenant_columns.
func (c Config) TenantColumnProblems() []sdk.FieldError {
	var problems []sdk.FieldError
	if c.TenantColumn == "" {
		problems = append(problems, sdk.FieldError{Field: "tenant_column", Problem: "must not be empty"})
	}
	for table, col := range c.TenantColumns {
		if col == "" {
			problems = append(problems, sdk.FieldError{Field: "tenant_columns." + table, Problem: "must not be empty"})
		}
	}
	return problems
}

// Classified reports whether err is past classifying: nil, the end of the
// call's context (the daemon's own doing), or already an sdk error.
func Classified(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var se *sdk.Error
	return errors.As(err, &se)
}

// CheckReady refuses a call before Configure has succeeded, and a tenant id
// the daemon's format does not allow: the daemon checks ids too, but a
// deleter does not rely on that.
func CheckReady(configured bool, format, tenant string) error {
	if !configured {
		return sdk.Unavailable(errors.New("not configured"))
	}
	return sdk.CheckTenantID(format, tenant)
}

// SchemaChanged is the error of planning again at Count or Delete: a config
// error then means the schema changed since Configure in a way the config
// no longer fits, and nothing will work until someone looks.
func SchemaChanged(err error) error {
	var se *sdk.Error
	if errors.As(err, &se) && se.Code == sdk.CodeInvalidConfig {
		return sdk.Permanent(fmt.Errorf("the schema changed since the deleter was configured: %w", err))
	}
	return err
}

// CheckOwnerLoops refuses dependent tables (without a tenant column) that
// own each other in a loop: their rows would belong to a tenant only
// through themselves.
func CheckOwnerLoops[T comparable](tables []T, dependent func(T) bool, owners func(T) []T, name func(T) string) error {
	if problem := fkgraph.OwnerLoop(tables, dependent, owners, name); problem != "" {
		return sdk.InvalidConfig(sdk.FieldError{Field: "tables", Problem: problem})
	}
	return nil
}

// KeyList names foreign keys for a plan's "via": sorted, so that the text
// does not depend on the catalogue's order.
func KeyList[E any](edges []E, text func(E) string) string {
	var keys []string
	for _, e := range edges {
		keys = append(keys, text(e))
	}
	sort.Strings(keys)
	return strings.Join(keys, " or FK ")
}

// Tally is what one Delete removed, per table (breakdown key) and in all.
type Tally struct {
	ByTable  map[string]int64
	Total    int64
	progress sdk.Progress
}

// NewTally starts a Delete's tally with every table of the plan at zero, so
// that the breakdown names the tables that had no rows too; progress, when
// not nil, hears the running total.
func NewTally(tables []string, progress sdk.Progress) *Tally {
	if progress == nil {
		progress = func(int64) {}
	}
	t := &Tally{ByTable: map[string]int64{}, progress: progress}
	for _, name := range tables {
		t.ByTable[name] = 0
	}
	return t
}

// Add counts n rows removed from table.
func (t *Tally) Add(table string, n int64) {
	t.ByTable[table] += n
	t.Total += n
}

// Report tells the daemon the running total.
func (t *Tally) Report() { t.progress(t.Total) }
