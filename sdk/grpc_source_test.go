package sdk_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/lifecycled/lifecycled/sdk"
	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

// queueSource is a sdk.DLQSource over a slice: Fetch hands out the next
// messages and never gives one twice, as a Kafka reader that has moved on.
type queueSource struct {
	mu    sync.Mutex
	queue []sdk.DeadLetter
	calls []int // bytes of the values of each Republish call
	// refuse fails every Republish call after the first refuseAfter.
	refuse      error
	refuseAfter int
}

func (q *queueSource) Configure(context.Context, *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	return &sdk.ConfigureResponse{Source: sdk.Protocol2Traits}, nil
}

func (q *queueSource) Fetch(_ context.Context, req *sdk.FetchRequest) (*sdk.FetchResponse, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := min(req.Max, len(q.queue))
	out := q.queue[:n]
	q.queue = q.queue[n:]
	return &sdk.FetchResponse{Messages: out}, nil
}

func (q *queueSource) Commit(context.Context, *sdk.CommitRequest) (*sdk.CommitResponse, error) {
	return &sdk.CommitResponse{}, nil
}

func (q *queueSource) Republish(_ context.Context, req *sdk.RepublishRequest) (*sdk.RepublishResponse, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.refuse != nil && len(q.calls) >= q.refuseAfter {
		return nil, q.refuse
	}
	size := 0
	resp := &sdk.RepublishResponse{}
	for _, m := range req.Messages {
		size += len(m.Value)
		resp.Results = append(resp.Results, sdk.RepublishResult{ID: m.ID, Acked: true})
	}
	q.calls = append(q.calls, size)
	return resp, nil
}

// serveSource runs impl behind a real gRPC server with the plugin side's limit
// and returns the address.
func serveSource(t *testing.T, impl sdk.DLQSource, limit int) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := grpc.NewServer(grpc.MaxRecvMsgSize(limit), grpc.MaxSendMsgSize(limit))
	pb.RegisterDLQSourceServer(s, sdk.NewSourceServer(impl, limit))
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return l.Addr().String()
}

// dial connects the daemon's side: recv is what the connection accepts,
// claimed is the limit the client believes in.
func dial(t *testing.T, addr string, recv, claimed int) sdk.DLQSource {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(recv), grpc.MaxCallSendMsgSize(recv)))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return daemonEnd(t, sdk.KindDLQSource, claimed, conn).(sdk.DLQSource)
}

func letters(n, size int) []sdk.DeadLetter {
	out := make([]sdk.DeadLetter, n)
	for i := range out {
		out[i] = sdk.DeadLetter{Position: sdk.LogPosition("t.dlq.v1", 0, int64(i)), Key: []byte{byte(i), 0xff},
			Headers: []sdk.Header{{Key: []byte{'k', 0xff, byte(i)}, Value: []byte{0xfe}}}, Value: bytes.Repeat([]byte{byte(i)}, size)}
	}
	return out
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fetchAll fetches until n messages came or a fetch is empty.
func fetchAll(t *testing.T, c sdk.DLQSource, n int) []sdk.DeadLetter {
	t.Helper()
	var got []sdk.DeadLetter
	for len(got) < n {
		resp, err := c.Fetch(testCtx(t), &sdk.FetchRequest{Max: 1000, Wait: time.Millisecond})
		require.NoError(t, err)
		if len(resp.Messages) == 0 {
			break
		}
		got = append(got, resp.Messages...)
	}
	return got
}

// A response the daemon does not receive (here: larger than it accepts,
// as every fetch of more than 4 MiB was before) is not skipped: the next
// Fetch hands the same messages back, in batches that fit.
func TestFetchNotReceivedIsHandedBackInBatchesThatFit(t *testing.T) {
	q := &queueSource{queue: letters(30, 100<<10)}
	addr := serveSource(t, q, 64<<20)

	wrong := dial(t, addr, 1<<20, 64<<20)
	_, err := wrong.Fetch(testCtx(t), &sdk.FetchRequest{Max: 1000, Wait: time.Millisecond})
	require.Error(t, err, "3 MB do not fit in 1 MiB")
	require.Empty(t, q.queue, "the plugin's reader moved past all 30")

	right := dial(t, addr, 1<<20, 1<<20)
	got := fetchAll(t, right, 30)
	require.Len(t, got, 30, "every message handed back")
	for i, m := range got {
		_, offset, _ := sdk.ParseLogPosition(m.Position.ID)
		require.EqualValues(t, i, offset, "in order, once")
		require.Equal(t, letters(30, 100<<10)[i], sdk.DeadLetter{Position: m.Position, Key: m.Key, Headers: m.Headers, Value: m.Value})
	}
}

func TestFetchHandsBackAnUnacknowledgedBatchAndMovesOnAfterTheAck(t *testing.T) {
	q := &queueSource{queue: letters(5, 10)}
	addr := serveSource(t, q, 64<<20)
	c := dial(t, addr, 64<<20, 64<<20)
	first, err := c.Fetch(testCtx(t), &sdk.FetchRequest{Max: 2, Wait: time.Millisecond})
	require.NoError(t, err)
	require.Len(t, first.Messages, 2)

	// The daemon lost the response: it fetches again without acknowledging
	// it, as a client that never received it does.
	c = dial(t, addr, 64<<20, 64<<20)
	again, err := c.Fetch(testCtx(t), &sdk.FetchRequest{Max: 2, Wait: time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, first.Messages, again.Messages)

	// Received this time: the next Fetch acknowledges it and moves on.
	next, err := c.Fetch(testCtx(t), &sdk.FetchRequest{Max: 2, Wait: time.Millisecond})
	require.NoError(t, err)
	require.Len(t, next.Messages, 2)
	require.Equal(t, sdk.LogPosition("t.dlq.v1", 0, 2), next.Messages[0].Position)
}

// One message larger than the limit must not block the source forever: it
// crosses without its value, marked, and the messages after it follow.
func TestFetchOfAMessageLargerThanTheLimitTruncatesItAlone(t *testing.T) {
	q := &queueSource{queue: append(letters(1, 10), append(letters(1, 3<<20), letters(1, 10)...)...)}
	for i := range q.queue {
		q.queue[i].Position = sdk.LogPosition("t.dlq.v1", 0, int64(i))
	}
	addr := serveSource(t, q, 64<<20)
	c := dial(t, addr, 1<<20, 1<<20)
	got := fetchAll(t, c, 3)
	require.Len(t, got, 3)
	require.False(t, got[0].Truncated)
	require.True(t, got[1].Truncated)
	require.Nil(t, got[1].Value)
	require.Greater(t, got[1].OriginalSize, int64(3<<20))
	require.Equal(t, []sdk.Header{{Key: []byte{'k', 0xff, 0}, Value: []byte{0xfe}}}, got[1].Headers, "key and headers kept when they fit")
	require.False(t, got[2].Truncated)
	require.Equal(t, sdk.LogPosition("t.dlq.v1", 0, 2), got[2].Position)
}

func TestRepublishSplitsByBytesAndFailsAMessageOverTheLimitAlone(t *testing.T) {
	q := &queueSource{}
	addr := serveSource(t, q, 1<<20)
	c := dial(t, addr, 1<<20, 1<<20)
	var req sdk.RepublishRequest
	for i := 0; i < 30; i++ {
		req.Messages = append(req.Messages, sdk.RepublishMessage{ID: fmt.Sprint(i), Topic: "t", Key: []byte{0xff},
			Headers: []sdk.Header{{Key: []byte{0xff, 0}, Value: []byte{1}}}, Value: bytes.Repeat([]byte("x"), 100<<10)})
	}
	req.Messages = append(req.Messages, sdk.RepublishMessage{ID: "big", Topic: "t", Value: bytes.Repeat([]byte("x"), 2<<20)})
	resp, err := c.Republish(testCtx(t), &req)
	require.NoError(t, err)
	require.Len(t, resp.Results, 31)
	for i := 0; i < 30; i++ {
		require.Equal(t, sdk.RepublishResult{ID: fmt.Sprint(i), Acked: true}, resp.Results[i])
	}
	big := resp.Results[30]
	require.False(t, big.Acked)
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(big.Err))
	require.ErrorContains(t, big.Err, "too large")
	require.ErrorContains(t, big.Err, "RPC limit")
	require.Greater(t, len(q.calls), 2, "split into calls")
	total := 0
	for _, n := range q.calls {
		require.Less(t, n, 1<<20)
		total += n
	}
	require.Equal(t, 30*(100<<10), total)
}

// When a later call fails, the acknowledgements of earlier calls stand.
func TestRepublishKeepsEarlierAcksWhenALaterCallFails(t *testing.T) {
	q := &queueSource{refuseAfter: 1, refuse: sdk.Unavailable(fmt.Errorf("broker gone"))}
	addr := serveSource(t, q, 1<<20)
	c := dial(t, addr, 1<<20, 1<<20)
	var req sdk.RepublishRequest
	for i := 0; i < 3; i++ {
		req.Messages = append(req.Messages, sdk.RepublishMessage{ID: fmt.Sprint(i), Topic: "t", Value: bytes.Repeat([]byte("x"), 600<<10)})
	}
	resp, err := c.Republish(testCtx(t), &req)
	require.NoError(t, err)
	require.Equal(t, sdk.RepublishResult{ID: "0", Acked: true}, resp.Results[0])
	for _, r := range resp.Results[1:] {
		require.False(t, r.Acked)
		require.Equal(t, sdk.ClassRetryable, sdk.ClassOf(r.Err), "not the message's fault")
		require.ErrorContains(t, r.Err, "broker gone")
	}
	require.Len(t, q.calls, 1, "no call after the failed one")

	q.refuseAfter = 0
	_, err = c.Republish(testCtx(t), &req)
	require.Error(t, err, "no call got through: the whole call fails")
	require.Equal(t, sdk.ClassRetryable, sdk.ClassOf(err))
}

func TestHeaderKeysThatAreNotUTF8CrossAsBytes(t *testing.T) {
	h := &pb.Header{Key: []byte("bad\xffkey"), Value: []byte{0xfe}}
	b, err := proto.Marshal(&pb.FetchResponse{Messages: []*pb.DeadLetter{{Headers: []*pb.Header{h}}}})
	require.NoError(t, err, "protocol 1 failed here: string field contains invalid UTF-8")
	var back pb.FetchResponse
	require.NoError(t, proto.Unmarshal(b, &back))
	require.Equal(t, []byte("bad\xffkey"), back.Messages[0].Headers[0].Key)
}
