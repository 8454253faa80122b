package sdk

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

// DLQSourcePlugin is the go-plugin glue for DLQSource.
type DLQSourcePlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl DLQSource
	// MaxMessageBytes is the gRPC message limit of the daemon's side of the
	// connection (0 for DefaultMaxMessageBytes); the plugin side reads its
	// own from MaxMessageBytesEnv.
	MaxMessageBytes int
}

// GRPCServer implements plugin.GRPCPlugin.
func (p *DLQSourcePlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterDLQSourceServer(s, &sourceServer{impl: p.Impl, limit: limitFromEnv(),
		handlerBase: handlerBase{log: serverLogger, scrub: serverScrubber}})
	return nil
}

// GRPCClient implements plugin.GRPCPlugin.
func (p *DLQSourcePlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &sourceClient{c: pb.NewDLQSourceClient(c), limit: effectiveLimit(p.MaxMessageBytes)}, nil
}

// sourceServer serves a DLQSource. Fetch responses are cut below the RPC
// limit and kept until the daemon acknowledges them: a response the daemon
// did not receive (the connection broke, it was too large for the daemon,
// the call timed out) is handed back by the next Fetch instead of being
// skipped, because the plugin's reader has already moved past it and a
// later commit would cover it.
type sourceServer struct {
	pb.UnimplementedDLQSourceServer
	handlerBase
	impl  DLQSource
	limit int

	fetchMu     sync.Mutex
	pending     *pb.FetchResponse // sent, not yet acknowledged
	pendingMsgs []DeadLetter      // what pending holds
	carry       []DeadLetter      // fetched from impl, not yet sent (did not fit)
}

func (s *sourceServer) Configure(ctx context.Context, req *pb.ConfigureRequest) (*pb.ConfigureResponse, error) {
	return s.configure(ctx, req, s.impl.Configure)
}

func headersToPB(hs []Header) []*pb.Header {
	out := make([]*pb.Header, len(hs))
	for i, h := range hs {
		out[i] = &pb.Header{Key: h.Key, Value: h.Value}
	}
	return out
}

func headersFromPB(hs []*pb.Header) []Header {
	if len(hs) == 0 {
		return nil
	}
	out := make([]Header, len(hs))
	for i, h := range hs {
		out[i] = Header{Key: h.GetKey(), Value: h.GetValue()}
	}
	return out
}

func positionToPB(p Position) *pb.Position {
	return &pb.Position{Topic: p.Topic, Partition: p.Partition, Offset: p.Offset}
}

func positionFromPB(p *pb.Position) Position {
	return Position{Topic: p.GetTopic(), Partition: p.GetPartition(), Offset: p.GetOffset()}
}

// keyFromPB keeps the difference between no key and an empty key.
func keyFromPB(key []byte, null bool) []byte {
	if null {
		return nil
	}
	if key == nil {
		return []byte{}
	}
	return key
}

func deadLetterToPB(m DeadLetter) *pb.DeadLetter {
	return &pb.DeadLetter{
		Position: positionToPB(m.Position), Key: m.Key, KeyNull: m.Key == nil,
		Headers: headersToPB(m.Headers), Value: m.Value, TimestampUnixMs: m.Timestamp.UnixMilli(),
		OriginalTopic: m.OriginalTopic,
	}
}

// newBatchID returns a random non-zero id, so that an id acknowledged to an
// earlier plugin process never matches one of this process.
func newBatchID() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		if id := binary.LittleEndian.Uint64(b[:]); id != 0 {
			return id
		}
	}
}

func (s *sourceServer) Fetch(ctx context.Context, req *pb.FetchRequest) (*pb.FetchResponse, error) {
	s.fetchMu.Lock()
	defer s.fetchMu.Unlock()
	budget := s.limit
	if m := int(req.GetMaxBytes()); m > 0 && m < budget {
		budget = m
	}
	budget -= envelope
	var msgs []DeadLetter
	if p := s.pending; p != nil {
		switch {
		case req.GetReceivedBatch() == p.GetBatchId():
			// Received: on to the next batch.
		case proto.Size(p) <= budget:
			return p, nil // the daemon did not get it: the same batch again
		default:
			// It did not get it because it was too large for it: the same
			// messages again, in smaller batches.
			msgs = s.pendingMsgs
		}
		s.pending, s.pendingMsgs = nil, nil
	}
	if msgs == nil {
		var err error
		if msgs, err = s.next(ctx, req); err != nil {
			return nil, err
		}
	}
	out, rest := packFetch(msgs, budget)
	if len(rest) > 0 {
		s.carry = append(append([]DeadLetter(nil), rest...), s.carry...)
	}
	if len(out.Messages) > 0 {
		out.BatchId = newBatchID()
		s.pending, s.pendingMsgs = out, msgs[:len(out.Messages)]
	}
	return out, nil
}

// next takes what did not fit into earlier responses, else asks the plugin.
func (s *sourceServer) next(ctx context.Context, req *pb.FetchRequest) ([]DeadLetter, error) {
	if len(s.carry) > 0 {
		n := min(len(s.carry), max(1, int(req.GetMaxMessages())))
		msgs := s.carry[:n]
		s.carry = s.carry[n:]
		return msgs, nil
	}
	var msgs []DeadLetter
	err := s.guard("Fetch", func() error {
		resp, err := s.impl.Fetch(ctx, &FetchRequest{Max: int(req.GetMaxMessages()), Wait: time.Duration(req.GetWaitMs()) * time.Millisecond})
		if err != nil {
			return err
		}
		msgs = resp.Messages
		return nil
	})
	return msgs, err
}

// packFetch puts messages into a response until the next one would take it
// over budget, and returns the rest. A message that alone is over budget
// goes without its value (and, if still too large, its key and headers),
// marked truncated, so that it is stored with the reason instead of
// blocking the source forever.
func packFetch(msgs []DeadLetter, budget int) (*pb.FetchResponse, []DeadLetter) {
	out := &pb.FetchResponse{}
	size := 0
	for i, m := range msgs {
		dl := deadLetterToPB(m)
		n := sizeInList(dl)
		if n > budget {
			dl.Truncated, dl.OriginalSize = true, int64(proto.Size(dl))
			dl.Value = nil
			if sizeInList(dl) > budget {
				dl.Key, dl.KeyNull, dl.Headers = nil, true, nil
			}
			n = sizeInList(dl)
		}
		if len(out.Messages) > 0 && size+n > budget {
			return out, msgs[i:]
		}
		out.Messages = append(out.Messages, dl)
		size += n
	}
	return out, nil
}

func (s *sourceServer) Commit(ctx context.Context, req *pb.CommitRequest) (*pb.CommitResponse, error) {
	err := s.guard("Commit", func() error {
		ps := make([]Position, len(req.GetPositions()))
		for i, p := range req.GetPositions() {
			ps[i] = positionFromPB(p)
		}
		_, err := s.impl.Commit(ctx, &CommitRequest{Positions: ps})
		return err
	})
	if err != nil {
		return nil, err
	}
	return &pb.CommitResponse{}, nil
}

func (s *sourceServer) Republish(ctx context.Context, req *pb.RepublishRequest) (*pb.RepublishResponse, error) {
	var out *pb.RepublishResponse
	err := s.guard("Republish", func() error {
		msgs := make([]RepublishMessage, len(req.GetMessages()))
		for i, m := range req.GetMessages() {
			msgs[i] = RepublishMessage{ID: m.GetId(), Topic: m.GetTopic(), Key: keyFromPB(m.GetKey(), m.GetKeyNull()),
				Headers: headersFromPB(m.GetHeaders()), Value: m.GetValue()}
		}
		resp, err := s.impl.Republish(ctx, &RepublishRequest{Messages: msgs})
		if err != nil {
			return err
		}
		out = &pb.RepublishResponse{Results: make([]*pb.RepublishResult, len(resp.Results))}
		for i, r := range resp.Results {
			res := &pb.RepublishResult{Id: r.ID, Acked: r.Acked}
			if r.Err != nil {
				e := asError(s.scrub.ScrubError(r.Err))
				res.Error, res.ErrorMessage = errorInfo(e), validUTF8(e.Message)
			}
			out.Results[i] = res
		}
		return nil
	})
	return out, err
}

// validUTF8 keeps proto3 string fields marshallable: an error that quotes a
// message's bytes must not fail the whole response.
func validUTF8(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// sourceClient is the daemon's side of a DLQSource connection.
type sourceClient struct {
	c     pb.DLQSourceClient
	limit int

	mu       sync.Mutex
	received uint64 // batch id of the last Fetch response received
}

func (c *sourceClient) Configure(ctx context.Context, req *ConfigureRequest) (*ConfigureResponse, error) {
	r, err := configureRequestPB(req)
	if err != nil {
		return nil, err
	}
	resp, err := c.c.Configure(ctx, r)
	if err != nil {
		return nil, FromStatus(err)
	}
	return &ConfigureResponse{PluginVersion: resp.GetPluginVersion(), Warnings: resp.GetWarnings()}, nil
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
			Value: m.GetValue(), Timestamp: time.UnixMilli(m.GetTimestampUnixMs()).UTC(), OriginalTopic: m.GetOriginalTopic(),
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
			Headers: headersToPB(m.Headers), Value: m.Value}
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
