package main

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lifecycled/lifecycled/internal/sqldelete"
	"github.com/lifecycled/lifecycled/sdk"
)

// classify maps PostgreSQL and network errors to sdk classes: connection
// trouble, timeouts, lock waits, serialization failures and resource limits
// are retryable; bad SQL, permissions, bad input and constraint violations
// are not.
func classify(err error) error {
	if sqldelete.Classified(err) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			strings.HasPrefix(pgErr.Code, "53"), // insufficient resources
			strings.HasPrefix(pgErr.Code, "57"), // operator intervention, statement timeout
			pgErr.Code == "40001", pgErr.Code == "40P01", pgErr.Code == "55P03":
			return sdk.Retryable(err, 0)
		case strings.HasPrefix(pgErr.Code, "22"): // data exception: the tenant id does not fit the column
			return sdk.Invalid(err)
		case pgErr.Code == "42P01":
			return sdk.NotFound(err)
		default:
			return sdk.Permanent(err)
		}
	}
	// Anything else (refused or dropped connections, TLS, DNS, EOF) is the
	// network's or the server's state, which may change.
	return sdk.Retryable(err, 0)
}
