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
			st := ToStatus(tc.in)
			s, ok := status.FromError(st)
			require.True(t, ok)
			require.Equal(t, tc.grpcCode, s.Code())

			got := FromStatus(st)
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
	got := FromStatus(dead)
	require.Equal(t, ClassRetryable, ClassOf(got))
	require.True(t, IsTransportFailure(got))
	require.False(t, IsTransportFailure(FromStatus(ToStatus(Unavailable(errors.New("redis down"))))),
		"an answer from a live plugin is not a transport failure")
	require.Equal(t, ClassRetryable, ClassOf(FromStatus(context.DeadlineExceeded)))
}

func TestScrubber(t *testing.T) {
	s := &Scrubber{}
	s.AddFromConfig(map[string]any{"password": "hunter2-pw", "nested": map[string]any{"sasl_password": "s4sl-secret"}, "addr": "10.0.0.1:6379",
		"listed": []any{map[string]any{"token": "l1sted-token"}}})
	s.Add("abc") // too short to scrub safely
	tests := map[string]struct{ in, want string }{
		"registered secret":    {"auth failed for hunter2-pw", "auth failed for REDACTED"},
		"nested secret":        {"sasl s4sl-secret rejected", "sasl REDACTED rejected"},
		"secret in a list":     {"bad l1sted-token", "bad REDACTED"},
		"url password":         {"dial postgres://app:pa55@db:5432/app failed", "dial postgres://app:REDACTED@db:5432/app failed"},
		"keyword dsn":          {"host=db password=pa55 user=app", "host=db password=REDACTED user=app"},
		"quoted keyword":       {`password='a b c' host=x`, `password=REDACTED host=x`},
		"token pair":           {"token: eyJhbGciOi", "token: REDACTED"},
		"nothing secret":       {"connected to 10.0.0.1:6379 abc", "connected to 10.0.0.1:6379 abc"},
		"url without password": {"redis://db:6379/0", "redis://db:6379/0"},
		"url query password":   {"postgres://app@db/app?sslmode=require&password=pa55", "postgres://app@db/app?sslmode=require&password=REDACTED"},
		"passphrase pair":      {"key_passphrase=pa55w0rd host=x", "key_passphrase=REDACTED host=x"},
		"go-sql-driver dsn":    {"dial app:pa55@tcp(db:3306)/app failed", "dial app:REDACTED@tcp(db:3306)/app failed"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.want, s.Scrub(tc.in))
		})
	}
	err := s.ScrubError(PartialDeletion(3, Retryable(fmt.Errorf("login as app:hunter2-pw failed"), 0)))
	require.NotContains(t, err.Error(), "hunter2")
	require.Equal(t, ClassRetryable, ClassOf(err))
}

func FuzzScrubNeverLeaksRegisteredSecret(f *testing.F) {
	f.Add("prefix s3cr3t-value suffix", "s3cr3t-value")
	f.Fuzz(func(t *testing.T, text, secret string) {
		if len(secret) < 4 {
			return
		}
		s := &Scrubber{}
		s.Add(secret)
		out := s.Scrub(text + secret + text)
		if len(secret) >= 4 && containsFold(out, secret) && !containsFold(Redacted, secret) && !containsFold(text, secret) {
			t.Fatalf("secret %q survived in %q", secret, out)
		}
	})
}

func containsFold(s, sub string) bool {
	return len(sub) > 0 && len(s) >= len(sub) && (func() bool {
		for i := 0; i+len(sub) <= len(s); i++ {
			if s[i:i+len(sub)] == sub {
				return true
			}
		}
		return false
	})()
}
