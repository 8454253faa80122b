package sdk

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// driverError stands for a driver's typed error (pgconn.PgError,
// smithy.APIError) that a plugin inspects after classifying.
type driverError struct{ code string }

func (e *driverError) Error() string { return "driver: " + e.code }

func TestConstructorsClassifyAndKeepTheCause(t *testing.T) {
	tests := map[string]struct {
		make     func(error) error
		class    Class
		code     Code
		is       error // sentinel it matches, if any
		grpcCode codes.Code
	}{
		"not found":     {make: NotFound, class: ClassPermanent, code: CodeNotFound, is: ErrNotFound, grpcCode: codes.NotFound},
		"invalid":       {make: Invalid, class: ClassPermanent, code: CodeInvalidArgument, grpcCode: codes.InvalidArgument},
		"unsupported":   {make: Unsupported, class: ClassPermanent, code: CodeUnsupported, is: ErrUnsupported, grpcCode: codes.Unimplemented},
		"unavailable":   {make: Unavailable, class: ClassRetryable, code: CodeUnavailable, is: ErrUnavailable, grpcCode: codes.Unavailable},
		"not committed": {make: NotCommitted, class: ClassRetryable, code: CodeNotCommitted, grpcCode: codes.Unavailable},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, tc.make(nil), "nil stays nil")

			cause := &driverError{code: "42P01"}
			err := tc.make(fmt.Errorf("table audit_logs: %w", cause))
			var e *Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, tc.class, e.Class, "class")
			require.Equal(t, tc.code, e.Code, "code")
			require.Equal(t, tc.class, ClassOf(err))
			require.Equal(t, "table audit_logs: driver: 42P01", err.Error(), "the message is the cause's")
			if tc.is != nil {
				require.ErrorIs(t, err, tc.is)
			}

			// On the plugin's side the cause is still there.
			var de *driverError
			require.ErrorAs(t, err, &de)
			require.Same(t, cause, de)

			// Across gRPC the meaning travels, the cause does not.
			st, ok := status.FromError(toStatus(err))
			require.True(t, ok)
			require.Equal(t, tc.grpcCode, st.Code())
			back := fromStatus(toStatus(err))
			require.Equal(t, tc.class, ClassOf(back))
			require.ErrorAs(t, back, &e)
			require.Equal(t, tc.code, e.Code)
			require.Equal(t, err.Error(), back.Error())
			require.False(t, errors.As(back, &de), "the driver's error stays in the plugin")
		})
	}
}

func TestConstructorsReclassifyAnSDKError(t *testing.T) {
	inner := Retryable(errors.New("no such table"), 0)
	err := NotFound(fmt.Errorf("table audit_logs: %w", inner))
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, ClassPermanent, e.Class)
	require.Equal(t, CodeNotFound, e.Code)
	require.Equal(t, "table audit_logs: no such table", e.Error(), "the context wrapped around it is kept")
	require.ErrorIs(t, err, ErrNotFound)
	require.NotErrorIs(t, err, ErrUnavailable)
	require.NotSame(t, inner, err, "a new error, the old one unchanged")
	require.Equal(t, ClassRetryable, ClassOf(inner))
}

func TestConstructorsNeverChangeASentinel(t *testing.T) {
	err := Invalid(ErrNotFound)
	require.Equal(t, CodeInvalidArgument, err.(*Error).Code)
	require.Equal(t, CodeNotFound, ErrNotFound.Code)
	require.Equal(t, ClassPermanent, ErrNotFound.Class)
}
