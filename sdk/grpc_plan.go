package sdk

import (
	"context"
	"errors"

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

// Plan serves the Plan RPC: Unsupported when the deleter is not a Planner.
func (s *deleterServer) Plan(ctx context.Context, req *pb.PlanRequest) (*pb.PlanResponse, error) {
	return serveOptional(s, "Plan", errNotPlanner, "plan", func(p Planner) (*PlanResponse, error) {
		return p.Plan(ctx, &PlanRequest{TenantID: req.GetTenantId()})
	}, planToPB)
}
