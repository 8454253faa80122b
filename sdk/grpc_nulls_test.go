package sdk_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/sdk"
)

// recordingSource keeps the messages a Republish call received.
type recordingSource struct {
	queueSource
	got []sdk.RepublishMessage
}

func (r *recordingSource) Republish(_ context.Context, req *sdk.RepublishRequest) (*sdk.RepublishResponse, error) {
	r.got = append(r.got, req.Messages...)
	resp := &sdk.RepublishResponse{}
	for _, m := range req.Messages {
		resp.Results = append(resp.Results, sdk.RepublishResult{ID: m.ID, Acked: true})
	}
	return resp, nil
}

// Null is not empty, across the plugin protocol in both directions: a
// tombstone (null value) is not an empty value, a null key not an empty
// key, a null header value not an empty one (proto3 bytes cannot tell
// them apart without the *_null fields).
func TestNullAndEmptyCrossTheProtocolApart(t *testing.T) {
	shapes := []sdk.DeadLetter{
		{Position: sdk.LogPosition("t.dlq.v1", 0, 0), Key: nil, Value: nil, Headers: []sdk.Header{{Key: []byte("h"), Value: nil}}},
		{Position: sdk.LogPosition("t.dlq.v1", 0, 1), Key: []byte{}, Value: []byte{}, Headers: []sdk.Header{{Key: []byte("h"), Value: []byte{}}}},
		{Position: sdk.LogPosition("t.dlq.v1", 0, 2), Key: []byte("k"), Value: []byte("v"), Headers: []sdk.Header{{Key: []byte{}, Value: []byte("x")}}},
	}
	src := &recordingSource{queueSource: queueSource{queue: append([]sdk.DeadLetter(nil), shapes...)}}
	c := dial(t, serveSource(t, src, 4<<20), 4<<20, 4<<20)
	got := fetchAll(t, c, len(shapes))
	require.Len(t, got, len(shapes))
	for i, want := range shapes {
		require.Equal(t, want.Key == nil, got[i].Key == nil, "offset %d: key null", i)
		require.Equal(t, want.Value == nil, got[i].Value == nil, "offset %d: value null", i)
		require.Equal(t, want.Headers[0].Value == nil, got[i].Headers[0].Value == nil, "offset %d: header value null", i)
		require.Equal(t, string(want.Value), string(got[i].Value))
	}

	var msgs []sdk.RepublishMessage
	for i, d := range shapes {
		msgs = append(msgs, sdk.RepublishMessage{ID: string(rune('a' + i)), Topic: "t.events.v1", Key: d.Key, Value: d.Value, Headers: d.Headers})
	}
	_, err := c.Republish(testCtx(t), &sdk.RepublishRequest{Messages: msgs})
	require.NoError(t, err)
	require.Len(t, src.got, len(msgs))
	for i, want := range msgs {
		require.Equal(t, want.Key == nil, src.got[i].Key == nil, "republish %d: key null", i)
		require.Equal(t, want.Value == nil, src.got[i].Value == nil, "republish %d: value null (a tombstone stays one)", i)
		require.Equal(t, want.Headers[0].Value == nil, src.got[i].Headers[0].Value == nil, "republish %d: header value null", i)
	}
}
