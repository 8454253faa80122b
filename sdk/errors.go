package sdk

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Class says whether trying again may help.
type Class int

// Classes. Retryable: the store or broker is unreachable, timed out, throttled
// or failed server-side (network errors, 5xx, 408, 429); the daemon retries
// later, with backoff, honouring RetryAfter. Permanent: trying again cannot
// help (invalid input or config, authentication, not found, unsupported).
const (
	ClassUnknown Class = iota
	ClassRetryable
	ClassPermanent
)

func (c Class) String() string {
	switch c {
	case ClassRetryable:
		return "retryable"
	case ClassPermanent:
		return "permanent"
	default:
		return "unknown"
	}
}

// Code says what went wrong, for the daemon's error mapping.
type Code int

// Codes.
const (
	CodeUnknown Code = iota
	CodeInvalidConfig
	CodeInvalidArgument
	CodeNotFound
	CodeUnsupported
	CodeUnavailable
	CodeInternal
	CodeCanceled
	// CodeNotCommitted: a DLQSource's Commit acknowledged none of the
	// positions, and the broker delivers those messages again (NotCommitted).
	CodeNotCommitted
)

func (c Code) String() string {
	switch c {
	case CodeInvalidConfig:
		return "invalid config"
	case CodeInvalidArgument:
		return "invalid argument"
	case CodeNotFound:
		return "not found"
	case CodeUnsupported:
		return "unsupported"
	case CodeUnavailable:
		return "unavailable"
	case CodeInternal:
		return "internal"
	case CodeCanceled:
		return "canceled"
	case CodeNotCommitted:
		return "not committed"
	default:
		return "unknown"
	}
}

// Sentinels for errors.Is. An *Error matches the sentinel of its code.
var (
	ErrInvalidConfig = &Error{Code: CodeInvalidConfig, Class: ClassPermanent, Message: "invalid config"}
	ErrNotFound      = &Error{Code: CodeNotFound, Class: ClassPermanent, Message: "not found"}
	ErrUnsupported   = &Error{Code: CodeUnsupported, Class: ClassPermanent, Message: "unsupported"}
	ErrUnavailable   = &Error{Code: CodeUnavailable, Class: ClassRetryable, Message: "unavailable"}
)

// FieldError is one problem with one config field.
type FieldError struct {
	Field   string
	Problem string
}

// Error is an error that crosses the plugin boundary with its meaning.
type Error struct {
	Class      Class
	Code       Code
	Message    string
	RetryAfter time.Duration // a hint for retryable errors (429 Retry-After); 0 when none
	Fields     []FieldError  // for CodeInvalidConfig
	// Deleted is set when a Delete failed part way: how many items it
	// deleted before the failure.
	Deleted    int64
	HasDeleted bool
	cause      error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Message)
	if len(e.Fields) > 0 {
		b.WriteString(": ")
		for i, f := range e.Fields {
			if i > 0 {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "%s: %s", f.Field, f.Problem)
		}
	}
	if e.HasDeleted {
		fmt.Fprintf(&b, " (deleted %d before the failure)", e.Deleted)
	}
	return b.String()
}

// Unwrap returns the cause the plugin wrapped, on the plugin's side only.
func (e *Error) Unwrap() error { return e.cause }

// Is matches sentinels by code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	return t.Code == e.Code && (t == ErrInvalidConfig || t == ErrNotFound || t == ErrUnsupported || t == ErrUnavailable)
}

// Retryable marks err as worth retrying, with an optional retry-after hint.
func Retryable(err error, retryAfter time.Duration) error {
	if err == nil {
		return nil
	}
	e := asError(err)
	e.Class = ClassRetryable
	if e.Code == CodeUnknown || e.Code == CodeInternal {
		e.Code = CodeUnavailable
	}
	e.RetryAfter = retryAfter
	return e
}

// Permanent marks err as not worth retrying.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	e := asError(err)
	e.Class = ClassPermanent
	return e
}

// InvalidConfig reports field problems found by Configure.
func InvalidConfig(fields ...FieldError) error {
	return &Error{Class: ClassPermanent, Code: CodeInvalidConfig, Message: "invalid config", Fields: fields}
}

// InvalidArgument reports a bad request (a tenant id the store cannot take).
func InvalidArgument(format string, args ...any) error {
	return &Error{Class: ClassPermanent, Code: CodeInvalidArgument, Message: fmt.Sprintf(format, args...)}
}

// Unavailable reports that the store cannot be reached now (retryable).
func Unavailable(err error) error { return withCode(err, ClassRetryable, CodeUnavailable) }

// NotFound reports that what the config names does not exist (a table, a
// topic): permanent until the config or the store changes.
func NotFound(err error) error { return withCode(err, ClassPermanent, CodeNotFound) }

// Invalid reports a request the store refuses as such (a tenant id that does
// not fit the column type): permanent.
func Invalid(err error) error { return withCode(err, ClassPermanent, CodeInvalidArgument) }

// NotCommitted is what a DLQSource's Commit with per-message acks returns
// when it knows that none of the positions was acknowledged and the broker
// delivers them again (their channel closed before the acks were sent):
// the daemon then matches their redeliveries to what it stored. Any other
// Commit error leaves it unsure whether the acks went through, and it then
// stores a redelivery again rather than risk taking another identical
// message for one (retryable).
func NotCommitted(err error) error { return withCode(err, ClassRetryable, CodeNotCommitted) }

// Unsupported reports an operation this plugin or store cannot do: permanent.
func Unsupported(err error) error { return withCode(err, ClassPermanent, CodeUnsupported) }

// withCode gives err a class and a code. The error built keeps err as its
// cause, for errors.Is and errors.As on the plugin's side; only the message
// and the meaning cross to the daemon.
func withCode(err error, class Class, code Code) error {
	if err == nil {
		return nil
	}
	e := asError(err)
	e.Class, e.Code = class, code
	return e
}

// PartialDeletion reports a Delete that failed after deleting some items.
// The class of err is kept (a dropped connection stays retryable).
func PartialDeletion(deleted int64, err error) error {
	e := asError(err)
	e.Deleted, e.HasDeleted = deleted, true
	return e
}

// ClassOf returns the class of err. Context errors count as retryable (the
// call was cut short, not refused); errors without a class are retryable
// too, because a delete that might succeed must not be given up on.
func ClassOf(err error) Class {
	var e *Error
	if errors.As(err, &e) && e.Class != ClassUnknown {
		return e.Class
	}
	if err == nil {
		return ClassUnknown
	}
	return ClassRetryable
}

// CodeOf returns the code of err, CodeUnknown when it has none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeUnknown
}

// RetryAfterOf returns the retry-after hint of err, or 0.
func RetryAfterOf(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}

// DeletedBefore returns how many items a failed Delete removed first.
func DeletedBefore(err error) (int64, bool) {
	var e *Error
	if errors.As(err, &e) && e.HasDeleted {
		return e.Deleted, true
	}
	return 0, false
}

// asError converts err to a fresh *Error (never one of the sentinels).
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		cp := *e
		if outer := err.Error(); err != error(e) && strings.HasSuffix(outer, e.Error()) {
			// Keep the context the plugin wrapped around it ("table x: ...").
			cp.Message = strings.TrimSuffix(outer, e.Error()) + e.Message
		}
		return &cp
	}
	code := CodeInternal
	class := ClassUnknown
	switch {
	case errors.Is(err, context.Canceled):
		code, class = CodeCanceled, ClassRetryable
	case errors.Is(err, context.DeadlineExceeded):
		code, class = CodeUnavailable, ClassRetryable
	}
	return &Error{Class: class, Code: code, Message: err.Error(), cause: err}
}
