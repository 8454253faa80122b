package main

import (
	"database/sql/driver"
	"errors"

	"github.com/go-sql-driver/mysql"

	"github.com/lifecycled/lifecycled/internal/sqldelete"
	"github.com/lifecycled/lifecycled/sdk"
)

// Server errors worth retrying: the server or the connection was in the
// way, not the request.
var retryableErrors = map[uint16]bool{
	1040: true, // too many connections
	1053: true, // server shutdown in progress
	1205: true, // lock wait timeout
	1213: true, // deadlock
	1317: true, // query interrupted
	1927: true, // connection killed (MariaDB)
	1969: true, // statement timeout (MariaDB max_statement_time)
	3024: true, // statement timeout (MySQL max_execution_time)
	2006: true, // server has gone away
	2013: true, // lost connection during query
	1290: true, // --read-only (a failover in progress)
	1836: true, // read-only mode (MariaDB)
}

// classify maps MySQL and network errors to sdk classes: connection
// trouble, timeouts, lock waits and deadlocks are retryable; bad SQL,
// permissions, bad input and key violations are not.
func classify(err error) error {
	if sqldelete.Classified(err) {
		return err
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch {
		case retryableErrors[me.Number]:
			return sdk.Retryable(err, 0)
		case me.Number == 1146:
			return &sdk.Error{Class: sdk.ClassPermanent, Code: sdk.CodeNotFound, Message: err.Error()}
		case me.Number == 1366 || me.Number == 1292 || me.Number == 1406:
			// The tenant id does not fit the column.
			return &sdk.Error{Class: sdk.ClassPermanent, Code: sdk.CodeInvalidArgument, Message: err.Error()}
		default:
			return sdk.Permanent(err)
		}
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) {
		return sdk.Retryable(err, 0)
	}
	// Anything else (refused or dropped connections, TLS, DNS, EOF) is the
	// network's or the server's state, which may change.
	return sdk.Retryable(err, 0)
}
