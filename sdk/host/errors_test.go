package host

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lifecycled/lifecycled/sdk"
	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

func TestTransportFailuresAreRetryable(t *testing.T) {
	dead := status.Error(codes.Unavailable, "connection error: desc = \"transport: error while dialing\"")
	got := fromStatus(dead)
	require.Equal(t, sdk.ClassRetryable, sdk.ClassOf(got))
	require.True(t, IsTransportFailure(got))
	require.True(t, IsTransportFailure(dead), "the gRPC error itself, before it is classed")

	// A live plugin's Unavailable carries its error detail.
	st, err := status.New(codes.Unavailable, "redis down").WithDetails(&pb.ErrorInfo{
		Class: pb.ErrorInfo_CLASS_RETRYABLE, Code: pb.ErrorInfo_CODE_UNAVAILABLE})
	require.NoError(t, err)
	answer := fromStatus(st.Err())
	require.ErrorIs(t, answer, sdk.ErrUnavailable)
	require.False(t, IsTransportFailure(answer), "an answer from a live plugin is not a transport failure")

	require.False(t, IsTransportFailure(sdk.Unavailable(errors.New("redis down"))), "an error of the daemon's own")
	require.Equal(t, sdk.ClassRetryable, sdk.ClassOf(fromStatus(context.DeadlineExceeded)))
}

func TestScrubTextRemovesDSNPasswords(t *testing.T) {
	require.Equal(t, "dial postgres://app:"+Redacted+"@db:5432/app failed", ScrubText("dial postgres://app:pa55@db:5432/app failed"))
}
