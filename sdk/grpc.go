package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

// Handshake is the go-plugin handshake. The cookie only stops a plugin from
// being run by hand by mistake; the checksum and AutoMTLS are the security.
var Handshake = plugin.HandshakeConfig{
	MagicCookieKey:   "LIFECYCLED_PLUGIN",
	MagicCookieValue: "d6f1c2a7-lifecycled-plugin-v1",
}

// Plugin names in the go-plugin plugin set, one per kind.
const (
	KindTenantDeleter = "tenant_deleter"
	KindDLQSource     = "dlq_source"
)

// HostPluginSets is what the daemon gives go-plugin: every protocol version it
// speaks, with a client for each plugin kind.
func HostPluginSets() map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{
		ProtocolVersion: {
			KindTenantDeleter: &TenantDeleterPlugin{},
			KindDLQSource:     &DLQSourcePlugin{},
		},
	}
}

// guard runs a handler with panic recovery and secret scrubbing, so that a
// bug in a plugin answers an Internal error instead of killing the process,
// and nothing that leaves the plugin holds a secret.
func (h *handlerBase) guard(method string, fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			h.log.Error("handler panicked", "method", method, "panic", h.scrub.Scrub(fmt.Sprint(p)), "stack", string(debug.Stack()))
			err = &Error{Class: ClassPermanent, Code: CodeInternal, Message: fmt.Sprintf("plugin panicked in %s: %s", method, h.scrub.Scrub(fmt.Sprint(p)))}
		}
		if err != nil {
			err = ToStatus(h.scrub.ScrubError(err))
		}
	}()
	return fn()
}

type handlerBase struct {
	log   hclog.Logger
	scrub *Scrubber
}

func (h *handlerBase) configureRequest(req *pb.ConfigureRequest) (*ConfigureRequest, error) {
	cfg := map[string]any{}
	if len(req.GetConfigJson()) > 0 {
		if err := json.Unmarshal(req.GetConfigJson(), &cfg); err != nil {
			return nil, InvalidConfig(FieldError{Field: "config", Problem: "not a JSON object: " + err.Error()})
		}
	}
	h.scrub.AddFromConfig(cfg)
	return &ConfigureRequest{Name: req.GetName(), Config: cfg, TenantIDFormat: req.GetTenantIdFormat()}, nil
}

// configure serves Configure for either plugin kind.
func (h *handlerBase) configure(ctx context.Context, req *pb.ConfigureRequest,
	impl func(context.Context, *ConfigureRequest) (*ConfigureResponse, error)) (*pb.ConfigureResponse, error) {
	var out *pb.ConfigureResponse
	err := h.guard("Configure", func() error {
		r, err := h.configureRequest(req)
		if err != nil {
			return err
		}
		resp, err := impl(ctx, r)
		if err != nil {
			return err
		}
		out = &pb.ConfigureResponse{PluginVersion: resp.PluginVersion, Warnings: resp.Warnings}
		return nil
	})
	return out, err
}

func configureRequestPB(req *ConfigureRequest) (*pb.ConfigureRequest, error) {
	cfg := req.Config
	if cfg == nil {
		cfg = map[string]any{}
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, InvalidConfig(FieldError{Field: "config", Problem: err.Error()})
	}
	return &pb.ConfigureRequest{Name: req.Name, ConfigJson: b, TenantIdFormat: req.TenantIDFormat}, nil
}

// --- TenantDeleter ---

// TenantDeleterPlugin is the go-plugin glue for TenantDeleter.
type TenantDeleterPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl TenantDeleter
}

// GRPCServer implements plugin.GRPCPlugin.
func (p *TenantDeleterPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterTenantDeleterServer(s, &deleterServer{impl: p.Impl, handlerBase: handlerBase{log: serverLogger, scrub: serverScrubber}})
	return nil
}

// GRPCClient implements plugin.GRPCPlugin.
func (p *TenantDeleterPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &deleterClient{c: pb.NewTenantDeleterClient(c)}, nil
}

type deleterServer struct {
	pb.UnimplementedTenantDeleterServer
	handlerBase
	impl TenantDeleter
}

func (s *deleterServer) Configure(ctx context.Context, req *pb.ConfigureRequest) (*pb.ConfigureResponse, error) {
	return s.configure(ctx, req, s.impl.Configure)
}

func (s *deleterServer) Count(ctx context.Context, req *pb.CountRequest) (*pb.CountResponse, error) {
	var out *pb.CountResponse
	err := s.guard("Count", func() error {
		resp, err := s.impl.Count(ctx, &CountRequest{TenantID: req.GetTenantId()})
		if err != nil {
			return err
		}
		out = &pb.CountResponse{Count: resp.Count, Breakdown: resp.Breakdown}
		return nil
	})
	return out, err
}

// progressInterval throttles progress events on the stream.
const progressInterval = 100 * time.Millisecond

func (s *deleterServer) Delete(req *pb.DeleteRequest, stream pb.TenantDeleter_DeleteServer) error {
	return s.guard("Delete", func() error {
		var (
			mu       sync.Mutex
			lastSent time.Time
		)
		progress := func(n int64) {
			mu.Lock()
			defer mu.Unlock()
			if time.Since(lastSent) < progressInterval {
				return
			}
			lastSent = time.Now()
			// A failed send means the caller went away; ctx tells the plugin.
			_ = stream.Send(&pb.DeleteEvent{Event: &pb.DeleteEvent_Progress{Progress: &pb.DeleteProgress{DeletedSoFar: n}}})
		}
		resp, err := s.impl.Delete(stream.Context(), &DeleteRequest{TenantID: req.GetTenantId()}, progress)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		return stream.Send(&pb.DeleteEvent{Event: &pb.DeleteEvent_Result{Result: &pb.DeleteResult{
			DeletedCount: resp.DeletedCount, Breakdown: resp.Breakdown}}})
	})
}

type deleterClient struct {
	c pb.TenantDeleterClient
}

func (c *deleterClient) Configure(ctx context.Context, req *ConfigureRequest) (*ConfigureResponse, error) {
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

func (c *deleterClient) Count(ctx context.Context, req *CountRequest) (*CountResponse, error) {
	resp, err := c.c.Count(ctx, &pb.CountRequest{TenantId: req.TenantID})
	if err != nil {
		return nil, FromStatus(err)
	}
	return &CountResponse{Count: resp.GetCount(), Breakdown: resp.GetBreakdown()}, nil
}

func (c *deleterClient) Delete(ctx context.Context, req *DeleteRequest, progress Progress) (*DeleteResponse, error) {
	stream, err := c.c.Delete(ctx, &pb.DeleteRequest{TenantId: req.TenantID})
	if err != nil {
		return nil, FromStatus(err)
	}
	var lastProgress int64 = -1
	for {
		ev, err := stream.Recv()
		if err == io.EOF {
			return nil, &Error{Class: ClassRetryable, Code: CodeInternal, Message: "plugin ended the delete stream without a result"}
		}
		if err != nil {
			e := asError(FromStatus(err))
			if !e.HasDeleted && lastProgress >= 0 {
				// The plugin died or the connection broke: the last progress
				// it reported is the best count there is.
				e.Deleted, e.HasDeleted = lastProgress, true
			}
			return nil, e
		}
		switch x := ev.GetEvent().(type) {
		case *pb.DeleteEvent_Progress:
			lastProgress = x.Progress.GetDeletedSoFar()
			if progress != nil {
				progress(lastProgress)
			}
		case *pb.DeleteEvent_Result:
			return &DeleteResponse{DeletedCount: x.Result.GetDeletedCount(), Breakdown: x.Result.GetBreakdown()}, nil
		}
	}
}

// --- DLQSource ---

// DLQSourcePlugin is the go-plugin glue for DLQSource.
type DLQSourcePlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl DLQSource
}

// GRPCServer implements plugin.GRPCPlugin.
func (p *DLQSourcePlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterDLQSourceServer(s, &sourceServer{impl: p.Impl, handlerBase: handlerBase{log: serverLogger, scrub: serverScrubber}})
	return nil
}

// GRPCClient implements plugin.GRPCPlugin.
func (p *DLQSourcePlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &sourceClient{c: pb.NewDLQSourceClient(c)}, nil
}

type sourceServer struct {
	pb.UnimplementedDLQSourceServer
	handlerBase
	impl DLQSource
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

func (s *sourceServer) Fetch(ctx context.Context, req *pb.FetchRequest) (*pb.FetchResponse, error) {
	var out *pb.FetchResponse
	err := s.guard("Fetch", func() error {
		resp, err := s.impl.Fetch(ctx, &FetchRequest{Max: int(req.GetMaxMessages()), Wait: time.Duration(req.GetWaitMs()) * time.Millisecond})
		if err != nil {
			return err
		}
		out = &pb.FetchResponse{Messages: make([]*pb.DeadLetter, len(resp.Messages))}
		for i, m := range resp.Messages {
			out.Messages[i] = &pb.DeadLetter{
				Position: positionToPB(m.Position), Key: m.Key, KeyNull: m.Key == nil,
				Headers: headersToPB(m.Headers), Value: m.Value, TimestampUnixMs: m.Timestamp.UnixMilli(),
				OriginalTopic: m.OriginalTopic,
			}
		}
		return nil
	})
	return out, err
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
			key := m.GetKey()
			if m.GetKeyNull() {
				key = nil
			} else if key == nil {
				key = []byte{}
			}
			msgs[i] = RepublishMessage{ID: m.GetId(), Topic: m.GetTopic(), Key: key, Headers: headersFromPB(m.GetHeaders()), Value: m.GetValue()}
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
				res.Error, res.ErrorMessage = errorInfo(e), e.Message
			}
			out.Results[i] = res
		}
		return nil
	})
	return out, err
}

type sourceClient struct {
	c pb.DLQSourceClient
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
	resp, err := c.c.Fetch(ctx, &pb.FetchRequest{MaxMessages: int32(req.Max), WaitMs: req.Wait.Milliseconds()})
	if err != nil {
		return nil, FromStatus(err)
	}
	out := &FetchResponse{Messages: make([]DeadLetter, len(resp.GetMessages()))}
	for i, m := range resp.GetMessages() {
		key := m.GetKey()
		if m.GetKeyNull() {
			key = nil
		} else if key == nil {
			key = []byte{}
		}
		out.Messages[i] = DeadLetter{
			Position: positionFromPB(m.GetPosition()), Key: key, Headers: headersFromPB(m.GetHeaders()),
			Value: m.GetValue(), Timestamp: time.UnixMilli(m.GetTimestampUnixMs()).UTC(), OriginalTopic: m.GetOriginalTopic(),
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

func (c *sourceClient) Republish(ctx context.Context, req *RepublishRequest) (*RepublishResponse, error) {
	msgs := make([]*pb.RepublishMessage, len(req.Messages))
	for i, m := range req.Messages {
		msgs[i] = &pb.RepublishMessage{Id: m.ID, Topic: m.Topic, Key: m.Key, KeyNull: m.Key == nil,
			Headers: headersToPB(m.Headers), Value: m.Value}
	}
	resp, err := c.c.Republish(ctx, &pb.RepublishRequest{Messages: msgs})
	if err != nil {
		return nil, FromStatus(err)
	}
	out := &RepublishResponse{Results: make([]RepublishResult, len(resp.GetResults()))}
	for i, r := range resp.GetResults() {
		res := RepublishResult{ID: r.GetId(), Acked: r.GetAcked()}
		if !res.Acked {
			if r.GetError() != nil {
				res.Err = fromErrorInfo(r.GetError(), r.GetErrorMessage())
			} else {
				res.Err = &Error{Class: ClassRetryable, Code: CodeUnavailable, Message: "not acknowledged"}
			}
		}
		out.Results[i] = res
	}
	return out, nil
}
