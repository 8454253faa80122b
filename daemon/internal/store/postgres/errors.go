package postgres

import (
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"
	"github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"
)

// pgError is the one place that reads pgx's errors: no row becomes
// derrors.ErrNotFound; a lost or refused connection, a server shutting
// down, a timeout or a closed pool becomes derrors.ErrStoreUnavailable; a
// unique violation becomes derrors.ErrConflict. Anything else is returned
// as it is. The messages of the translated errors are generic (see
// driverError): pgx's name the database user and the database.
func pgError(err error) error { return sqlstore.Translate(err, pgx.ErrNoRows, pgClassify) }

func pgClassify(err error) error {
	var (
		pe *pgconn.PgError
		ce *pgconn.ConnectError
		ne net.Error
	)
	switch {
	case errors.As(err, &ce):
		// Whatever the server said, there is no connection to use.
		return sqlstore.Unavailable("cannot connect", err)
	case errors.As(err, &pe):
		return pgServerError(pe, err)
	case errors.Is(err, puddle.ErrClosedPool):
		return sqlstore.Unavailable("the store is closed", err)
	case pgconn.Timeout(err):
		return sqlstore.Unavailable("timed out", err)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, pgconn.ErrConnClosed),
		errors.Is(err, net.ErrClosed), errors.As(err, &ne), strings.Contains(err.Error(), "unexpected EOF"):
		return sqlstore.Unavailable("connection lost", err)
	default:
		return err
	}
}

// pgServerError translates an error the server sent, by its SQLSTATE.
func pgServerError(pe *pgconn.PgError, err error) error {
	switch {
	case pe.Code == "23505": // unique_violation
		return sqlstore.Conflict("duplicate key ("+pe.ConstraintName+")", err)
	case strings.HasPrefix(pe.Code, "08"): // connection_exception
		return sqlstore.Unavailable("connection lost", err)
	case pe.Code == "57P01", pe.Code == "57P02": // admin_shutdown (also pg_terminate_backend), crash_shutdown
		return sqlstore.Unavailable("the server closed the connection", err)
	case pe.Code == "57P03": // cannot_connect_now: starting up or in recovery
		return sqlstore.Unavailable("the server is not accepting connections", err)
	case pe.Code == "57014": // query_canceled: statement_timeout
		return sqlstore.Unavailable("timed out", err)
	case pe.Code == "53300": // too_many_connections
		return sqlstore.Unavailable("too many connections", err)
	case strings.HasPrefix(pe.Code, "28"), pe.Code == "3D000": // invalid authorization, no such database
		return sqlstore.Unavailable("connection refused", err)
	default:
		return err
	}
}
