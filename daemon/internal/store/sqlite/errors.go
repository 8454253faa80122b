package sqlite

import (
	"database/sql"
	"errors"

	"github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// sqliteError is the one place that reads SQLite's errors: no row becomes
// derrors.ErrNotFound; a file that is locked by another process past the
// busy timeout, cannot be read or written, or a closed store becomes
// derrors.ErrStoreUnavailable; a unique violation becomes
// derrors.ErrConflict. Anything else is returned as it is. The messages of
// the translated errors are generic (see driverError).
func sqliteError(err error) error { return sqlstore.Translate(err, sql.ErrNoRows, sqliteClassify) }

func sqliteClassify(err error) error {
	var se *sqlite.Error
	switch {
	case errors.As(err, &se):
		return sqliteCodeError(se.Code(), err)
	case errors.Is(err, sql.ErrConnDone), err.Error() == "sql: database is closed":
		return sqlstore.Unavailable("the store is closed", err)
	default:
		return err
	}
}

// sqliteCodeError translates an error by its (extended) result code.
func sqliteCodeError(code int, err error) error {
	switch code & 0xff {
	case sqlite3.SQLITE_CONSTRAINT:
		if code == sqlite3.SQLITE_CONSTRAINT_UNIQUE || code == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY {
			return sqlstore.Conflict("duplicate key", err)
		}
		return err
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return sqlstore.Unavailable("the database file is locked", err)
	case sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_FULL, sqlite3.SQLITE_READONLY:
		return sqlstore.Unavailable("the database file cannot be read or written", err)
	default:
		return err
	}
}
