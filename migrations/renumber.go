package migrations

import (
	"database/sql"
	"fmt"
)

// NumberingTable marks a database whose version in Table is in the shared
// numbering. Up creates it before it applies anything; a database whose
// Table holds a version and which has no NumberingTable was migrated
// before the dialects shared their numbering, and its version is
// translated (renumbering) first.
const NumberingTable = "lifecycled_schema_numbering"

// sharedNumbering is the row of NumberingTable of the numbering both
// dialects share.
const sharedNumbering = "shared"

// renumbering maps the versions a dialect's files had before the
// dialects shared their numbering to the shared ones; a dialect whose
// numbers did not change (PostgreSQL's list is the shared one) has none.
var renumbering = map[Dialect]map[uint]uint{
	SQLite: {1: 2, 2: 4, 3: 5, 4: 6, 5: 7, 6: 8, 7: 9, 8: 10, 9: 11, 10: 12, 11: 13, 12: 14, 13: 15, 14: 16,
		15: 18, 16: 20, 17: 21, 18: 22},
}

// renumbered is the shared number of v, a version of d's own numbering.
// A version the old numbering did not have stays as it is (Up then
// refuses it as newer than the binary).
func renumbered(d Dialect, v uint) uint {
	if n, ok := renumbering[d][v]; ok {
		return n
	}
	return v
}

// tableExists is the statement that counts the tables named $1/?1 where
// golang-migrate keeps Table.
var tableExists = map[Dialect]string{
	Postgres: `SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = current_schema() AND tablename = $1`,
	SQLite:   `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1`,
}

// rowQuerier is what a database handle and a transaction both have.
type rowQuerier interface {
	QueryRow(query string, args ...any) *sql.Row
}

// renumberLock serialises the renumbering of daemons that share a
// database, in the transaction (SQLite's is serial: one writer).
var renumberLock = map[Dialect]string{
	Postgres: `SELECT pg_advisory_xact_lock($1)`,
}

// renumberLockKey is the advisory lock of renumberLock.
const renumberLockKey = 0x6c63642d6e756d // "lcd-num"

func exists(d Dialect, q rowQuerier, table string) (bool, error) {
	stmt, ok := tableExists[d]
	if !ok {
		return false, fmt.Errorf("unknown dialect %q", d)
	}
	var n int
	if err := q.QueryRow(stmt, table).Scan(&n); err != nil {
		return false, fmt.Errorf("look for table %s: %w", table, err)
	}
	return n > 0, nil
}

// oldNumbering reports whether db was migrated in d's numbering from
// before the shared one: it has a version and no NumberingTable.
func oldNumbering(d Dialect, db rowQuerier) (bool, error) {
	marked, err := exists(d, db, NumberingTable)
	if err != nil || marked {
		return false, err
	}
	versioned, err := exists(d, db, Table)
	if err != nil || !versioned {
		return false, err
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM ` + Table).Scan(&n); err != nil {
		return false, fmt.Errorf("read schema version: %w", err)
	}
	return n > 0, nil
}

// renumber marks db as in the shared numbering, translating first the
// version of a database migrated in the old one, in one transaction: a
// database is renumbered once, whatever fails after.
func renumber(d Dialect, db *sql.DB) error {
	if marked, err := exists(d, db, NumberingTable); err != nil || marked {
		return err
	}
	tx, err := db.Begin()
	if err != nil {
		return fmt.Errorf("renumber schema version: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if lock, ok := renumberLock[d]; ok {
		if _, err := tx.Exec(lock, int64(renumberLockKey)); err != nil {
			return fmt.Errorf("renumber schema version: %w", err)
		}
	}
	if marked, err := exists(d, tx, NumberingTable); err != nil || marked {
		return err // marked meanwhile, by another daemon's Up
	}
	old, err := oldNumbering(d, tx)
	if err != nil {
		return err
	}
	if old {
		var v uint
		if err := tx.QueryRow(`SELECT version FROM ` + Table).Scan(&v); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if n := renumbered(d, v); n != v {
			if _, err := tx.Exec(fmt.Sprintf(`UPDATE %s SET version = %d`, Table, n)); err != nil {
				return fmt.Errorf("renumber schema version %d to %d: %w", v, n, err)
			}
		}
	}
	if _, err := tx.Exec(`CREATE TABLE ` + NumberingTable + ` (numbering TEXT PRIMARY KEY)`); err != nil {
		return fmt.Errorf("mark the schema numbering: %w", err)
	}
	if _, err := tx.Exec(`INSERT INTO ` + NumberingTable + ` (numbering) VALUES ('` + sharedNumbering + `')`); err != nil {
		return fmt.Errorf("mark the schema numbering: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("renumber schema version: %w", err)
	}
	return nil
}
