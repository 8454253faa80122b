package sdk

import (
	"context"
	"sync"
	"time"

	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

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
		resp, err := s.impl.Delete(stream.Context(), &DeleteRequest{TenantID: req.GetTenantId(), PlanFingerprint: req.GetPlanFingerprint()}, progress)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		return stream.Send(&pb.DeleteEvent{Event: &pb.DeleteEvent_Result{Result: &pb.DeleteResult{
			DeletedCount: resp.DeletedCount, Breakdown: resp.Breakdown, Proof: proofToPB(resp.Proof)}}})
	})
}

// serveOptional serves an RPC of the optional interface I (Planner,
// Verifier): Unsupported (lacking) when the deleter does not implement it,
// an internal error when it answers nothing (what names the answer), else
// the answer as toPB converts it.
func serveOptional[I, R, Out any](s *deleterServer, method string, lacking error, what string, call func(I) (*R, error), toPB func(*R) Out) (Out, error) {
	var out Out
	err := s.guard(method, func() error {
		i, ok := s.impl.(I)
		if !ok {
			return Unsupported(lacking)
		}
		resp, err := call(i)
		if err != nil {
			return err
		}
		if resp == nil {
			return &Error{Class: ClassPermanent, Code: CodeInternal, Message: "plugin returned no " + what + " and no error"}
		}
		out = toPB(resp)
		return nil
	})
	return out, err
}
