package migrations

import (
	"database/sql"
	"fmt"
	"io/fs"
	"testing/fstest"
)

// OldLatest is the newest version of each dialect's numbering before the
// dialects shared theirs.
var OldLatest = map[Dialect]uint{Postgres: 22, SQLite: 18}

// OldFS is d's migrations as they were numbered before the dialects
// shared their numbering: the files that were, under their old numbers.
func OldFS(d Dialect) (fs.FS, error) {
	old := map[uint]uint{}
	for o, n := range renumbering[d] {
		old[n] = o
	}
	dir, err := FS(d)
	if err != nil {
		return nil, err
	}
	entries, err := fs.ReadDir(dir, ".")
	if err != nil {
		return nil, err
	}
	out := fstest.MapFS{}
	for _, e := range entries {
		v := versionOf(e.Name())
		o, ok := old[v]
		if renumbering[d] == nil {
			o, ok = v, v <= OldLatest[d]
		}
		if !ok {
			continue // a file that does nothing here, or a newer change
		}
		b, err := fs.ReadFile(dir, e.Name())
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("%03d%s", o, e.Name()[3:])
		out[name] = &fstest.MapFile{Data: b, Mode: 0o444}
	}
	return out, nil
}

// MigrateOld migrates db to version v of d's old numbering, as a binary of
// before the shared numbering did. Tests use it (and OldFS) to make the
// databases that renumber translates.
func MigrateOld(d Dialect, db *sql.DB, v uint) error {
	dir, err := OldFS(d)
	if err != nil {
		return err
	}
	m, err := migrateFrom(d, db, dir)
	if err != nil {
		return err
	}
	return m.Migrate(v)
}
