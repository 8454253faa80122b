// Package migrations holds the state-store schema as numbered SQL files
// (postgres/ and sqlite/, NNN_name.up.sql and .down.sql), embedded in the
// binary and applied with golang-migrate at start and by `lifecycled migrate`.
//
// Both dialects share one list: a change has the same number and name in
// both directories, with a file that does nothing where a dialect has
// nothing to do. Databases migrated before that (SQLite's files were
// numbered on their own) are renumbered on their first migration here
// (renumber.go).
//
// A database whose schema is newer than the newest migration this binary
// carries is refused: running old code on a new schema risks writing rows the
// new code cannot read, so the operator must upgrade the binary instead.
package migrations

import (
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	pgxmigrate "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	sqlitemigrate "github.com/golang-migrate/migrate/v4/database/sqlite"
	"github.com/golang-migrate/migrate/v4/source/iofs"
)

//go:embed postgres/*.sql sqlite/*.sql
var files embed.FS

// Dialect names a migration set.
type Dialect string

// Dialects.
const (
	Postgres Dialect = "postgres"
	SQLite   Dialect = "sqlite"
)

// Table is the name of the table where the applied version is recorded.
const Table = "lifecycled_schema_migrations"

// ErrSchemaNewer means the database was migrated by a newer lifecycled.
var ErrSchemaNewer = errors.New("database schema is newer than this lifecycled binary")

// ErrDirty means an earlier migration failed half way.
var ErrDirty = errors.New("database schema is dirty (a migration failed half way)")

// Status describes a database's schema against this binary's migrations.
type Status struct {
	Current uint     // 0 when nothing was applied
	Latest  uint     // newest migration in this binary
	Dirty   bool     // a migration failed half way
	Pending []string // names of migrations not yet applied
}

// FS returns the migration files of a dialect.
func FS(d Dialect) (fs.FS, error) { return fs.Sub(files, string(d)) }

// Available lists the up migrations of a dialect, in order, as "NNN_name".
func Available(d Dialect) ([]string, error) {
	entries, err := fs.ReadDir(files, string(d))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".up.sql"); ok {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

func versionOf(name string) uint {
	n, _ := strconv.ParseUint(strings.SplitN(name, "_", 2)[0], 10, 32)
	return uint(n)
}

func latest(d Dialect) (uint, []string, error) {
	names, err := Available(d)
	if err != nil || len(names) == 0 {
		return 0, nil, fmt.Errorf("no %s migrations embedded: %v", d, err)
	}
	return versionOf(names[len(names)-1]), names, nil
}

func newMigrate(d Dialect, db *sql.DB) (*migrate.Migrate, error) {
	dir, err := FS(d)
	if err != nil {
		return nil, err
	}
	return migrateFrom(d, db, dir)
}

// migrateFrom runs the migrations of dir, a directory of d's files, on db.
func migrateFrom(d Dialect, db *sql.DB, dir fs.FS) (*migrate.Migrate, error) {
	src, err := iofs.New(dir, ".")
	if err != nil {
		return nil, err
	}
	var drv database.Driver
	switch d {
	case Postgres:
		drv, err = pgxmigrate.WithInstance(db, &pgxmigrate.Config{MigrationsTable: Table})
	case SQLite:
		drv, err = sqlitemigrate.WithInstance(db, &sqlitemigrate.Config{MigrationsTable: Table})
	default:
		return nil, fmt.Errorf("unknown dialect %q", d)
	}
	if err != nil {
		return nil, fmt.Errorf("open migration driver: %w", err)
	}
	return migrate.NewWithInstance("iofs", src, string(d), drv)
}

// GetStatus reports the schema state of db.
func GetStatus(d Dialect, db *sql.DB) (Status, error) {
	old, err := oldNumbering(d, db)
	if err != nil {
		return Status{}, err
	}
	top, names, err := latest(d)
	if err != nil {
		return Status{}, err
	}
	m, err := newMigrate(d, db)
	if err != nil {
		return Status{}, err
	}
	v, dirty, err := m.Version()
	if err != nil && !errors.Is(err, migrate.ErrNilVersion) {
		return Status{}, fmt.Errorf("read schema version: %w", err)
	}
	if old {
		v = renumbered(d, v) // as Up will record it
	}
	st := Status{Current: v, Latest: top, Dirty: dirty}
	for _, n := range names {
		if versionOf(n) > v {
			st.Pending = append(st.Pending, n)
		}
	}
	return st, nil
}

// Up applies every pending migration. It refuses a schema newer than the
// binary and a dirty schema, with messages that say what to do.
func Up(d Dialect, db *sql.DB) (Status, error) {
	if err := renumber(d, db); err != nil {
		return Status{}, err
	}
	st, err := GetStatus(d, db)
	if err != nil {
		return st, err
	}
	if st.Current > st.Latest {
		return st, fmt.Errorf("%w: database is at version %d, this binary knows up to %d; upgrade lifecycled (or restore the older database)", ErrSchemaNewer, st.Current, st.Latest)
	}
	if st.Dirty {
		return st, fmt.Errorf("%w at version %d: fix the schema by hand, then set the version in %s", ErrDirty, st.Current, Table)
	}
	m, err := newMigrate(d, db)
	if err != nil {
		return st, err
	}
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return st, fmt.Errorf("apply migrations: %w", err)
	}
	return GetStatus(d, db)
}

// Down reverts every migration. Only tests use it: it drops all data.
func Down(d Dialect, db *sql.DB) error {
	m, err := newMigrate(d, db)
	if err != nil {
		return err
	}
	if err := m.Down(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return err
	}
	return nil
}

// Steps applies n migrations up (n > 0) or reverts -n (n < 0). Only tests
// use it, to check that a down migration and the next up keep what they can.
func Steps(d Dialect, db *sql.DB, n int) error {
	m, err := newMigrate(d, db)
	if err != nil {
		return err
	}
	return m.Steps(n)
}
