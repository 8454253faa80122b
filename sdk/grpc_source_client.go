package sdk

import (
	"context"
	"fmt"
	"sync"
	"time"

	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

// sourceClient is the daemon's side of a DLQSource connection.
type sourceClient struct {
	c     pb.DLQSourceClient
	limit int

	mu       sync.Mutex
	received uint64 // batch id of the last Fetch response received
}

func (c *sourceClient) Configure(ctx context.Context, req *ConfigureRequest) (*ConfigureResponse, error) {
	return configureCall(ctx, req, c.c.Configure)
}

func (c *sourceClient) Fetch(ctx context.Context, req *FetchRequest) (*FetchResponse, error) {
	c.mu.Lock()
	ack := c.received
	c.mu.Unlock()
	resp, err := c.c.Fetch(ctx, &pb.FetchRequest{MaxMessages: int32(req.Max), WaitMs: req.Wait.Milliseconds(),
		MaxBytes: int64(c.limit), ReceivedBatch: ack})
	if err != nil {
		return nil, FromStatus(err)
	}
	if id := resp.GetBatchId(); id != 0 {
		c.mu.Lock()
		c.received = id
		c.mu.Unlock()
	}
	out := &FetchResponse{Messages: make([]DeadLetter, len(resp.GetMessages()))}
	for i, m := range resp.GetMessages() {
		out.Messages[i] = DeadLetter{
			Position: positionFromPB(m.GetPosition()), Key: keyFromPB(m.GetKey(), m.GetKeyNull()), Headers: headersFromPB(m.GetHeaders()),
			Value: valueFromPB(m.GetValue(), m.GetValueNull()), Timestamp: time.UnixMilli(m.GetTimestampUnixMs()).UTC(), OriginalTopic: m.GetOriginalTopic(),
			Truncated: m.GetTruncated(), OriginalSize: m.GetOriginalSize(),
		}
	}
	return out, nil
}

func (c *sourceClient) Commit(ctx context.Context, req *CommitRequest) (*CommitResponse, error) {
	ps := make([]*pb.Position, len(req.Positions))
	for i, p := range req.Positions {
		ps[i] = positionToPB(p)
	}
	if _, err := c.c.Commit(ctx, &pb.CommitRequest{Positions: ps}); err != nil {
		return nil, FromStatus(err)
	}
	return &CommitResponse{}, nil
}

// Republish sends the messages in calls below the RPC limit. A message that
// alone is over the limit is not sent: it fails with a permanent error that
// says so. When a call fails, its messages and the ones not yet sent get
// that call's error, while the acknowledgements of earlier calls stand; the
// whole Republish fails only when no call got through.
func (c *sourceClient) Republish(ctx context.Context, req *RepublishRequest) (*RepublishResponse, error) {
	out := &RepublishResponse{Results: make([]RepublishResult, len(req.Messages))}
	budget := c.limit - envelope
	var (
		batch    []*pb.RepublishMessage
		index    []int
		size     int
		callErr  error
		answered bool
	)
	flush := func() {
		if len(batch) == 0 {
			return
		}
		defer func() { batch, index, size = nil, nil, 0 }()
		if callErr != nil {
			for _, i := range index {
				out.Results[i] = RepublishResult{ID: req.Messages[i].ID, Err: callErr}
			}
			return
		}
		resp, err := c.c.Republish(ctx, &pb.RepublishRequest{Messages: batch})
		if err == nil && len(resp.GetResults()) != len(batch) {
			err = &Error{Class: ClassRetryable, Code: CodeInternal,
				Message: fmt.Sprintf("plugin answered %d results for %d messages", len(resp.GetResults()), len(batch))}
		} else if err != nil {
			err = FromStatus(err)
		}
		if err != nil {
			callErr = err
			for _, i := range index {
				out.Results[i] = RepublishResult{ID: req.Messages[i].ID, Err: err}
			}
			return
		}
		answered = true
		for j, r := range resp.GetResults() {
			res := RepublishResult{ID: r.GetId(), Acked: r.GetAcked()}
			if !res.Acked {
				if r.GetError() != nil {
					res.Err = fromErrorInfo(r.GetError(), r.GetErrorMessage())
				} else {
					res.Err = &Error{Class: ClassRetryable, Code: CodeUnavailable, Message: "not acknowledged"}
				}
			}
			out.Results[index[j]] = res
		}
	}
	for i, m := range req.Messages {
		pm := &pb.RepublishMessage{Id: m.ID, Topic: m.Topic, Key: m.Key, KeyNull: m.Key == nil,
			Headers: headersToPB(m.Headers), Value: m.Value, ValueNull: m.Value == nil}
		n := sizeInList(pm)
		if n > budget {
			out.Results[i] = RepublishResult{ID: m.ID, Err: &Error{Class: ClassPermanent, Code: CodeInvalidArgument,
				Message: fmt.Sprintf("message too large for the plugin connection: %d bytes, over the RPC limit of %d bytes ([plugins] max_message_bytes)",
					n, c.limit)}}
			continue
		}
		if size+n > budget {
			flush()
		}
		batch, index, size = append(batch, pm), append(index, i), size+n
	}
	flush()
	if callErr != nil && !answered {
		return nil, callErr
	}
	return out, nil
}
