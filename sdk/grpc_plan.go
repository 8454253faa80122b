package sdk

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

// errNotPlanner is what the server answers for a deleter that does not
// implement Planner.
var errNotPlanner = errors.New("this deleter does not implement Plan")

func planToPB(p *PlanResponse) *pb.PlanResponse {
	out := &pb.PlanResponse{Fingerprint: validUTF8(p.Fingerprint)}
	for _, s := range p.Steps {
		out.Steps = append(out.Steps, &pb.PlanStep{Target: validUTF8(s.Target), Via: validUTF8(s.Via), Expected: s.Expected})
	}
	for _, n := range p.Notes {
		out.Notes = append(out.Notes, validUTF8(n))
	}
	return out
}

func planFromPB(p *pb.PlanResponse) *PlanResponse {
	out := &PlanResponse{Fingerprint: p.GetFingerprint(), Notes: p.GetNotes()}
	for _, s := range p.GetSteps() {
		out.Steps = append(out.Steps, PlanStep{Target: s.GetTarget(), Via: s.GetVia(), Expected: s.GetExpected()})
	}
	return out
}

// Plan serves the Plan RPC: Unsupported when the deleter is not a Planner.
func (s *deleterServer) Plan(ctx context.Context, req *pb.PlanRequest) (*pb.PlanResponse, error) {
	var out *pb.PlanResponse
	err := s.guard("Plan", func() error {
		p, ok := s.impl.(Planner)
		if !ok {
			return Unsupported(errNotPlanner)
		}
		resp, err := p.Plan(ctx, &PlanRequest{TenantID: req.GetTenantId()})
		if err != nil {
			return err
		}
		if resp == nil {
			return &Error{Class: ClassPermanent, Code: CodeInternal, Message: "plugin returned no plan and no error"}
		}
		out = planToPB(resp)
		return nil
	})
	return out, err
}

// Plan calls the plugin's Plan. A plugin built before the Plan RPC (or one
// in another language whose generated servicer leaves Plan out) answers
// UNIMPLEMENTED without our error detail; that becomes an Unsupported error
// (errors.Is(err, ErrUnsupported)) saying so, like a Go plugin whose deleter
// is not a Planner.
func (c *deleterClient) Plan(ctx context.Context, req *PlanRequest) (*PlanResponse, error) {
	resp, err := c.c.Plan(ctx, &pb.PlanRequest{TenantId: req.TenantID})
	if err != nil {
		if st, ok := status.FromError(err); ok && st.Code() == codes.Unimplemented && len(st.Details()) == 0 {
			return nil, &Error{Class: ClassPermanent, Code: CodeUnsupported,
				Message: "plugin does not implement Plan (it answers UNIMPLEMENTED: built before the Plan RPC, or written without it)", cause: err}
		}
		return nil, FromStatus(err)
	}
	return planFromPB(resp), nil
}

// The daemon's client for a deleter is always a Planner; whether the plugin
// can plan shows in the error.
var _ Planner = (*deleterClient)(nil)
