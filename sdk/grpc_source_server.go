package sdk

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/lifecycled/lifecycled/sdk/internal/wire"
	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

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

// Configure refuses a source that does not declare its traits: the daemon
// could not tell how to store its messages once.
func (s *sourceServer) Configure(ctx context.Context, req *pb.ConfigureRequest) (*pb.ConfigureResponse, error) {
	return s.configure(ctx, req, func(ctx context.Context, r *ConfigureRequest) (*ConfigureResponse, error) {
		resp, err := s.impl.Configure(ctx, r)
		if err != nil {
			return nil, err
		}
		if err := resp.Source.Check(); err != nil {
			return nil, &Error{Class: ClassPermanent, Code: CodeInternal, Message: "plugin bug: " + err.Error() + " (set ConfigureResponse.Source)"}
		}
		return resp, nil
	})
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
	budget -= wire.Envelope
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
		n := wire.SizeInList(dl)
		if n > budget {
			dl.Truncated, dl.OriginalSize = true, int64(proto.Size(dl))
			dl.Value, dl.ValueNull = nil, true // not stored; Truncated says why
			if wire.SizeInList(dl) > budget {
				dl.Key, dl.KeyNull, dl.Headers = nil, true, nil
			}
			n = wire.SizeInList(dl)
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
			msgs[i] = RepublishMessage{ID: m.GetId(), Topic: m.GetTopic(), Key: wire.Bytes(m.GetKey(), m.GetKeyNull()),
				Headers: headersFromPB(m.GetHeaders()), Value: wire.Bytes(m.GetValue(), m.GetValueNull())}
		}
		resp, err := s.impl.Republish(ctx, &RepublishRequest{Messages: msgs})
		if err != nil {
			return err
		}
		out = &pb.RepublishResponse{Results: make([]*pb.RepublishResult, len(resp.Results))}
		for i, r := range resp.Results {
			res := &pb.RepublishResult{Id: r.ID, Acked: r.Acked}
			if r.Err != nil {
				e := asError(scrubError(s.scrub, r.Err))
				res.Error, res.ErrorMessage = errorInfo(e), validUTF8(e.Message)
			}
			out.Results[i] = res
		}
		return nil
	})
	return out, err
}
