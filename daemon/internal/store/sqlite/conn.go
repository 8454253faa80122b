package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"
)

// sqliteQuerier is what a database handle and a transaction both have.
type sqliteQuerier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// sqliteConn is the SQLite adapter (see Querier). The schema keeps times as
// microseconds since the epoch (INTEGER, which compares and sorts as the
// times do) and ids as text: sqliteConn passes time.Time, *time.Time and
// uuid.UUID arguments so, and reads such columns back into *time.Time and
// **time.Time, so that the statements take and give the Go values the
// PostgreSQL ones do. sqliteError translates its errors.
type sqliteConn struct {
	q  sqliteQuerier
	db *sql.DB // nil in a transaction
}

func (c sqliteConn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	r, err := c.q.ExecContext(ctx, query, sqliteArgs(args)...)
	if err != nil {
		return 0, sqliteError(err)
	}
	n, err := r.RowsAffected()
	return n, sqliteError(err)
}

func (c sqliteConn) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	r, err := c.q.QueryContext(ctx, query, sqliteArgs(args)...)
	if err != nil {
		return nil, sqliteError(err)
	}
	return sqliteRows{r}, nil
}

func (c sqliteConn) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Scanner {
	return sqliteRow{c.q.QueryRowContext(ctx, query, sqliteArgs(args)...)}
}

// Tx runs fn in a transaction that takes the write lock at once
// (_txlock=immediate), so that it never fails half way for a lock.
func (c sqliteConn) Tx(ctx context.Context, fn func(q sqlstore.Querier) error) error {
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return sqliteError(err)
	}
	if err := fn(sqliteConn{q: tx}); err != nil {
		_ = tx.Rollback()
		return err
	}
	return sqliteError(tx.Commit())
}

// Snapshot is a transaction too: the one connection serves it alone.
func (c sqliteConn) Snapshot(ctx context.Context, fn func(q sqlstore.Querier) error) error {
	return c.Tx(ctx, fn)
}

// SnapshotTx is tx: one writer at a time, so nothing commits beside it.
func (c sqliteConn) SnapshotTx(ctx context.Context, fn func(q sqlstore.Querier) error) error {
	return c.Tx(ctx, fn)
}

// prepare compiles a statement that runs many times (intake's insert).
func (c sqliteConn) prepare(ctx context.Context, query string) (sqliteStmt, error) {
	st, err := c.q.PrepareContext(ctx, query)
	return sqliteStmt{st}, sqliteError(err)
}

type sqliteStmt struct{ st *sql.Stmt }

func (s sqliteStmt) Exec(ctx context.Context, args ...any) (int64, error) {
	r, err := s.st.ExecContext(ctx, sqliteArgs(args)...)
	if err != nil {
		return 0, sqliteError(err)
	}
	n, err := r.RowsAffected()
	return n, sqliteError(err)
}

func (s sqliteStmt) close() { _ = s.st.Close() }

type sqliteRow struct{ r *sql.Row }

func (r sqliteRow) Scan(dest ...any) error { return sqliteError(r.r.Scan(sqliteDests(dest)...)) }

type sqliteRows struct{ r *sql.Rows }

func (r sqliteRows) Next() bool             { return r.r.Next() }
func (r sqliteRows) Scan(dest ...any) error { return sqliteError(r.r.Scan(sqliteDests(dest)...)) }
func (r sqliteRows) Err() error             { return sqliteError(r.r.Err()) }
func (r sqliteRows) Close()                 { _ = r.r.Close() }

func sqliteArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case time.Time:
			out[i] = v.UnixMicro()
		case *time.Time:
			if v != nil {
				out[i] = v.UnixMicro()
			}
		case uuid.UUID:
			out[i] = v.String()
		default:
			out[i] = a
		}
	}
	return out
}

func sqliteDests(dest []any) []any {
	out := make([]any, len(dest))
	for i, d := range dest {
		switch p := d.(type) {
		case *time.Time:
			out[i] = microTime{p}
		case **time.Time:
			out[i] = nullMicroTime{p}
		default:
			out[i] = d
		}
	}
	return out
}

// microTime reads a time stored as microseconds since the epoch.
type microTime struct{ t *time.Time }

func (m microTime) Scan(src any) error {
	v, ok := src.(int64)
	if !ok {
		return fmt.Errorf("read a time: the column holds %T, not microseconds", src)
	}
	*m.t = time.UnixMicro(v).UTC()
	return nil
}

// nullMicroTime is microTime for a column that may be NULL.
type nullMicroTime struct{ t **time.Time }

func (m nullMicroTime) Scan(src any) error {
	if src == nil {
		*m.t = nil
		return nil
	}
	t := new(time.Time)
	if err := (microTime{t}).Scan(src); err != nil {
		return err
	}
	*m.t = t
	return nil
}
