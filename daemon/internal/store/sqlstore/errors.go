package sqlstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
)

// driverError is a driver error translated to a derrors sentinel by
// pgError or sqliteError. Its message is the sentinel's and a reason in
// generic words: a driver's message can name the database user, the
// database or the file, and it would reach API answers. The driver's error
// stays in the chain (errors.Is, errors.As) for logs and for callers that
// look for context.DeadlineExceeded.
type driverError struct {
	kind   error // derrors.ErrStoreUnavailable or derrors.ErrConflict
	reason string
	cause  error
}

func (e *driverError) Error() string { return e.kind.Error() + ": " + e.reason }

func (e *driverError) Unwrap() []error { return []error{e.kind, e.cause} }

// Translate is what pgError and sqliteError share: nil, an error already
// translated and a cancelled call stay as they are (the caller gave up; the
// store did nothing wrong), the driver's noRows becomes
// derrors.ErrNotFound, a deadline that passed makes the store unavailable;
// anything else is the dialect's to classify.
func Translate(err, noRows error, classify func(error) error) error {
	var de *driverError
	switch {
	case err == nil, errors.As(err, &de), errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, noRows):
		return derrors.ErrNotFound
	case errors.Is(err, context.DeadlineExceeded):
		return Unavailable("timed out", err)
	default:
		return classify(err)
	}
}

// Unavailable: the store cannot serve now; a later try may succeed.
func Unavailable(reason string, cause error) error {
	return &driverError{kind: derrors.ErrStoreUnavailable, reason: reason, cause: cause}
}

// Conflict: the statement broke a uniqueness rule.
func Conflict(reason string, cause error) error {
	return &driverError{kind: derrors.ErrConflict, reason: reason, cause: cause}
}

// foundOne is nil when a statement changed a row, else a not-found error
// that names what was looked for.
func foundOne(n int64, format string, args ...any) error {
	if n == 0 {
		return fmt.Errorf(format+": %w", append(args, derrors.ErrNotFound)...)
	}
	return nil
}

// leaseHeld is nil when a statement guarded by a deletion job's lease
// changed a row, else ErrLeaseLost: another daemon took the job over.
func leaseHeld(n int64, job uuid.UUID) error {
	if n == 0 {
		return fmt.Errorf("deletion job %s: %w", job, derrors.ErrLeaseLost)
	}
	return nil
}
