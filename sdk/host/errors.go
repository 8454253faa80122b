package host

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/internal/scrub"
	"github.com/lifecycled/lifecycled/sdk/internal/wire"
)

// fromStatus converts an error returned by a gRPC call to an *sdk.Error.
// Errors without the plugin's detail (the plugin process died, the
// connection broke, the deadline passed) are classed by their gRPC code.
func fromStatus(err error) error { return wire.FromStatus(err) }

// IsTransportFailure reports whether err means the plugin process or its
// connection is gone (as opposed to the plugin answering with an error).
func IsTransportFailure(err error) bool {
	var e *sdk.Error
	if errors.As(err, &e) {
		// The daemon's end keeps the gRPC error it classed as the cause.
		if cause := e.Unwrap(); cause != nil {
			err = cause
		}
	}
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.Unavailable && len(st.Details()) == 0
}

// Redacted replaces secrets in errors, logs and dumps.
const Redacted = scrub.Redacted

// ScrubText removes URL passwords, driver DSN passwords and password=...
// style pairs from text: what any part of lifecycled must do before it
// prints a DSN or an error that may contain one. A plugin's errors and logs
// are scrubbed by package sdk before they leave the plugin.
func ScrubText(text string) string { return scrub.Text(text) }
