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
// speaks, with a client for each plugin kind. maxMessageBytes is the gRPC
// message limit of the connections (0 for DefaultMaxMessageBytes); the
// daemon passes the same value to the plugin process in MaxMessageBytesEnv.
//
// Protocol 1 is accepted for deleters, whose protocol did not change; a
// DLQSource that negotiated 1 must be refused by the caller (see
// MinSourceProtocolVersion), which can say so more clearly than go-plugin.
func HostPluginSets(maxMessageBytes int) map[int]plugin.PluginSet {
	set := func() plugin.PluginSet {
		return plugin.PluginSet{
			KindTenantDeleter: &TenantDeleterPlugin{},
			KindDLQSource:     &DLQSourcePlugin{MaxMessageBytes: maxMessageBytes},
		}
	}
	return map[int]plugin.PluginSet{1: set(), ProtocolVersion: set()}
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
