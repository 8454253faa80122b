package host

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/internal/wire"
	"github.com/lifecycled/lifecycled/sdk/kafkaconv"
	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

// sourceClient is the daemon's end of a DLQSource connection. Under
// protocol 2 it reads the plugin as protocol 2 meant it: a position is
// Kafka's partition and offset (sdk.LogPosition), the origin is in the
// headers by the Kafka framework conventions (kafkaconv), and the traits
// are sdk.Protocol2Traits; the rest of the daemon sees protocol 3 only.
type sourceClient struct {
	c       pb.DLQSourceClient
	limit   int
	version int

	mu       sync.Mutex
	received uint64 // batch id of the last Fetch response received
}

func (c *sourceClient) Configure(ctx context.Context, req *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	resp, err := configureCall(ctx, req, c.c.Configure)
	if err == nil && c.version < 3 {
		resp.Source = sdk.Protocol2Traits
	}
	return resp, err
}

func (c *sourceClient) Fetch(ctx context.Context, req *sdk.FetchRequest) (*sdk.FetchResponse, error) {
	c.mu.Lock()
	ack := c.received
	c.mu.Unlock()
	resp, err := c.c.Fetch(ctx, &pb.FetchRequest{MaxMessages: int32(req.Max), WaitMs: req.Wait.Milliseconds(),
		MaxBytes: int64(c.limit), ReceivedBatch: ack})
	if err != nil {
		return nil, fromStatus(err)
	}
	if id := resp.GetBatchId(); id != 0 {
		c.mu.Lock()
		c.received = id
		c.mu.Unlock()
	}
	out := &sdk.FetchResponse{Messages: make([]sdk.DeadLetter, len(resp.GetMessages()))}
	for i, m := range resp.GetMessages() {
		d := sdk.DeadLetter{
			Position: c.positionFromPB(m.GetPosition()), Key: wire.Bytes(m.GetKey(), m.GetKeyNull()), Headers: headersFromPB(m.GetHeaders()),
			Value: wire.Bytes(m.GetValue(), m.GetValueNull()), Truncated: m.GetTruncated(), OriginalSize: m.GetOriginalSize(),
			Redelivered: m.GetRedelivered(),
		}
		if ms := m.GetTimestampUnixMs(); ms != 0 || c.version < 3 {
			d.Timestamp = time.UnixMilli(ms).UTC()
		}
		if c.version < 3 {
			d.Origin = kafkaconv.Origin(d.Headers, m.GetOriginalTopic())
		} else {
			d.Origin = originFromPB(m.GetOrigin())
		}
		out.Messages[i] = d
	}
	return out, nil
}

func (c *sourceClient) Commit(ctx context.Context, req *sdk.CommitRequest) (*sdk.CommitResponse, error) {
	ps := make([]*pb.Position, len(req.Positions))
	for i, p := range req.Positions {
		ps[i] = c.positionToPB(p)
	}
	if _, err := c.c.Commit(ctx, &pb.CommitRequest{Positions: ps}); err != nil {
		return nil, fromStatus(err)
	}
	return &sdk.CommitResponse{}, nil
}

// Republish sends the messages in calls below the RPC limit. A message that
// alone is over the limit is not sent: it fails with a permanent error that
// says so. When a call fails, its messages and the ones not yet sent get
// that call's error, while the acknowledgements of earlier calls stand; the
// whole Republish fails only when no call got through.
func (c *sourceClient) Republish(ctx context.Context, req *sdk.RepublishRequest) (*sdk.RepublishResponse, error) {
	out := &sdk.RepublishResponse{Results: make([]sdk.RepublishResult, len(req.Messages))}
	budget := c.limit - wire.Envelope
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
				out.Results[i] = sdk.RepublishResult{ID: req.Messages[i].ID, Err: callErr}
			}
			return
		}
		resp, err := c.c.Republish(ctx, &pb.RepublishRequest{Messages: batch})
		if err == nil && len(resp.GetResults()) != len(batch) {
			err = &sdk.Error{Class: sdk.ClassRetryable, Code: sdk.CodeInternal,
				Message: fmt.Sprintf("plugin answered %d results for %d messages", len(resp.GetResults()), len(batch))}
		} else if err != nil {
			err = fromStatus(err)
		}
		if err != nil {
			callErr = err
			for _, i := range index {
				out.Results[i] = sdk.RepublishResult{ID: req.Messages[i].ID, Err: err}
			}
			return
		}
		answered = true
		for j, r := range resp.GetResults() {
			res := sdk.RepublishResult{ID: r.GetId(), Acked: r.GetAcked()}
			if !res.Acked {
				if r.GetError() != nil {
					res.Err = wire.FromErrorInfo(r.GetError(), r.GetErrorMessage())
				} else {
					res.Err = &sdk.Error{Class: sdk.ClassRetryable, Code: sdk.CodeUnavailable, Message: "not acknowledged"}
				}
			}
			out.Results[index[j]] = res
		}
	}
	for i, m := range req.Messages {
		pm := &pb.RepublishMessage{Id: m.ID, Topic: m.Topic, Key: m.Key, KeyNull: m.Key == nil,
			Headers: headersToPB(m.Headers), Value: m.Value, ValueNull: m.Value == nil}
		n := wire.SizeInList(pm)
		if n > budget {
			out.Results[i] = sdk.RepublishResult{ID: m.ID, Err: &sdk.Error{Class: sdk.ClassPermanent, Code: sdk.CodeInvalidArgument,
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

// Conversions of the DLQSource messages between the sdk types and the wire,
// on the daemon's end; package sdk has the plugin's, and the round-trip
// tests hold the two to each other.

func headersToPB(hs []sdk.Header) []*pb.Header {
	out := make([]*pb.Header, len(hs))
	for i, h := range hs {
		out[i] = &pb.Header{Key: h.Key, Value: h.Value, ValueNull: h.Value == nil, Type: h.Type}
	}
	return out
}

func headersFromPB(hs []*pb.Header) []sdk.Header {
	if len(hs) == 0 {
		return nil
	}
	out := make([]sdk.Header, len(hs))
	for i, h := range hs {
		out[i] = sdk.Header{Key: h.GetKey(), Value: wire.Bytes(h.GetValue(), h.GetValueNull()), Type: h.GetType()}
	}
	return out
}

func (c *sourceClient) positionToPB(p sdk.Position) *pb.Position {
	if c.version < 3 {
		// Every position of a protocol 2 source came from positionFromPB.
		partition, offset, _ := sdk.ParseLogPosition(p.ID)
		return &pb.Position{Topic: p.Topic, Partition: partition, Offset: offset}
	}
	return &pb.Position{Topic: p.Topic, Id: p.ID, Display: p.Display}
}

func (c *sourceClient) positionFromPB(p *pb.Position) sdk.Position {
	if c.version < 3 {
		return sdk.LogPosition(p.GetTopic(), p.GetPartition(), p.GetOffset())
	}
	return sdk.Position{Topic: p.GetTopic(), ID: p.GetId(), Display: p.GetDisplay()}
}

func originFromPB(o *pb.Origin) sdk.Origin {
	out := sdk.Origin{Destination: o.GetDestination(), DestinationFrom: o.GetDestinationFrom(), DestinationConfigured: o.GetDestinationConfigured(),
		DestinationProblem: o.GetDestinationProblem(), ErrorMessage: o.GetErrorMessage(), ErrorClass: o.GetErrorClass(),
		Attempts: int(o.GetAttempts())}
	if ms := o.GetFirstFailedUnixMs(); ms != 0 {
		out.FirstFailedAt = time.UnixMilli(ms).UTC()
	}
	return out
}
