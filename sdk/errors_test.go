package sdk

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lifecycled/lifecycled/sdk/internal/scrub"
)

func TestErrorsSurviveTheGRPCHop(t *testing.T) {
	tests := map[string]struct {
		in         error
		class      Class
		code       Code
		retryAfter time.Duration
		fields     []FieldError
		deleted    int64
		hasDeleted bool
		is         error
		grpcCode   codes.Code
	}{
		"retryable with retry-after": {
			in: Retryable(errors.New("throttled (429)"), 7*time.Second), class: ClassRetryable, code: CodeUnavailable,
			retryAfter: 7 * time.Second, is: ErrUnavailable, grpcCode: codes.Unavailable,
		},
		"permanent": {
			in: Permanent(errors.New("access denied")), class: ClassPermanent, code: CodeInternal, grpcCode: codes.Internal,
		},
		"invalid config with fields": {
			in:    InvalidConfig(FieldError{Field: "dsn", Problem: "required"}, FieldError{Field: "tables", Problem: "empty"}),
			class: ClassPermanent, code: CodeInvalidConfig, is: ErrInvalidConfig, grpcCode: codes.InvalidArgument,
			fields: []FieldError{{Field: "dsn", Problem: "required"}, {Field: "tables", Problem: "empty"}},
		},
		"not found": {
			in:    fmt.Errorf("table audit_logs: %w", &Error{Class: ClassPermanent, Code: CodeNotFound, Message: "no such table"}),
			class: ClassPermanent, code: CodeNotFound, is: ErrNotFound, grpcCode: codes.NotFound,
		},
		"unsupported": {
			in: ErrUnsupported, class: ClassPermanent, code: CodeUnsupported, is: ErrUnsupported, grpcCode: codes.Unimplemented,
		},
		"partial deletion keeps class and count": {
			in:    PartialDeletion(1234, Unavailable(errors.New("connection reset"))),
			class: ClassRetryable, code: CodeUnavailable, deleted: 1234, hasDeleted: true, is: ErrUnavailable, grpcCode: codes.Unavailable,
		},
		"unclassed error is retryable internal": {
			in: errors.New("boom"), class: ClassRetryable, code: CodeInternal, grpcCode: codes.Internal,
		},
		"context canceled": {
			in: PartialDeletion(5, context.Canceled), class: ClassRetryable, code: CodeCanceled, deleted: 5, hasDeleted: true, grpcCode: codes.Canceled,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := toStatus(tc.in)
			s, ok := status.FromError(st)
			require.True(t, ok)
			require.Equal(t, tc.grpcCode, s.Code())

			got := fromStatus(st)
			var e *Error
			require.ErrorAs(t, got, &e)
			require.Equal(t, tc.class, e.Class, "class")
			require.Equal(t, tc.code, e.Code, "code")
			require.Equal(t, tc.retryAfter, RetryAfterOf(got))
			require.Equal(t, tc.fields, e.Fields)
			d, has := DeletedBefore(got)
			require.Equal(t, tc.deleted, d)
			require.Equal(t, tc.hasDeleted, has)
			if tc.is != nil {
				require.ErrorIs(t, got, tc.is)
			}
			require.Equal(t, asError(tc.in).Message, e.Message, "message kept")
		})
	}
}

func TestTransportFailuresAreRetryable(t *testing.T) {
	dead := status.Error(codes.Unavailable, "connection error: desc = \"transport: error while dialing\"")
	require.Equal(t, ClassRetryable, ClassOf(fromStatus(dead)))
	require.Equal(t, ClassRetryable, ClassOf(fromStatus(context.DeadlineExceeded)))
}

func TestScrubErrorKeepsTheClass(t *testing.T) {
	s := &scrub.Scrubber{}
	s.Add("hunter2-pw")
	err := scrubError(s, PartialDeletion(3, Retryable(fmt.Errorf("login as app:hunter2-pw failed"), 0)))
	require.NotContains(t, err.Error(), "hunter2")
	require.Equal(t, ClassRetryable, ClassOf(err))
}
