// Package derrors holds the error sentinels that carry meaning across the
// daemon's packages. Stores and plugin clients translate driver and gRPC
// errors into these at their edge; the admin API maps them to HTTP statuses
// and SYS_* codes in one table (adminapi.errorTable). Wrap them with %w to add
// context.
package derrors

import (
	"errors"
	"fmt"
)

var (
	// ErrNotFound: the thing asked for does not exist.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the request is malformed; nothing was changed.
	ErrInvalid = errors.New("invalid input")
	// ErrConflict: the request is well-formed but conflicts with the current state.
	ErrConflict = errors.New("conflict")
	// ErrUnavailable: a dependency (plugin, broker, store) cannot serve now; try later.
	ErrUnavailable = errors.New("unavailable")
	// ErrLeaseLost: another daemon took over work this one had claimed.
	ErrLeaseLost = errors.New("lease lost")
	// ErrStoreUnavailable: the state store cannot serve now (connection
	// lost, server shutting down, timed out, file locked); try later. It is
	// an ErrUnavailable, told apart so that the admin API can say which
	// dependency failed. The store's errors of this kind say it in generic
	// words and keep the driver's error, which can name the database user,
	// as their cause (errors.Unwrap) for logs.
	ErrStoreUnavailable = fmt.Errorf("state store %w", ErrUnavailable)
)
