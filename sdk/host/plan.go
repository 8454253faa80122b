package host

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lifecycled/lifecycled/sdk"
	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

// The optional methods of a deleter, on the daemon's end: Plan and Verify.

func planFromPB(p *pb.PlanResponse) *sdk.PlanResponse {
	out := &sdk.PlanResponse{Fingerprint: p.GetFingerprint(), Notes: p.GetNotes()}
	for _, s := range p.GetSteps() {
		out.Steps = append(out.Steps, sdk.PlanStep{Target: s.GetTarget(), Via: s.GetVia(), Expected: s.GetExpected()})
	}
	return out
}

func proofFromPB(checks []*pb.ProofCheck) []sdk.ProofCheck {
	var out []sdk.ProofCheck
	for _, c := range checks {
		out = append(out, sdk.ProofCheck{Kind: sdk.ProofKind(c.GetKind()), Target: c.GetTarget(),
			Checked: c.GetChecked(), Found: c.GetFound(), Detail: c.GetDetail()})
	}
	return out
}

// notServed reports whether err is gRPC's own UNIMPLEMENTED, without the
// plugin's error detail: the plugin's service has no such method.
func notServed(err error) bool {
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.Unimplemented && len(st.Details()) == 0
}

// unimplemented is what fromStatus makes of such an answer (permanent,
// Unsupported, the gRPC error as its cause) with a message that says why.
func unimplemented(err error, msg string) error {
	e := fromStatus(err).(*sdk.Error)
	e.Message = msg
	return e
}

// Plan calls the plugin's Plan. A plugin built before the Plan RPC (or one
// in another language whose generated servicer leaves Plan out) answers
// UNIMPLEMENTED without our error detail; that becomes an Unsupported error
// (errors.Is(err, sdk.ErrUnsupported)) saying so, like a Go plugin whose
// deleter is not a Planner.
func (c *deleterClient) Plan(ctx context.Context, req *sdk.PlanRequest) (*sdk.PlanResponse, error) {
	resp, err := c.c.Plan(ctx, &pb.PlanRequest{TenantId: req.TenantID})
	if err != nil {
		if notServed(err) {
			return nil, unimplemented(err, "plugin does not implement Plan (it answers UNIMPLEMENTED: built before the Plan RPC, or written without it)")
		}
		return nil, fromStatus(err)
	}
	return planFromPB(resp), nil
}

// Verify calls the plugin's Verify. A plugin built before the Verify RPC
// (or one in another language whose servicer leaves it out) answers
// UNIMPLEMENTED without our error detail; that becomes an Unsupported
// error (errors.Is(err, sdk.ErrUnsupported)), like a Go plugin whose
// deleter is not a Verifier.
func (c *deleterClient) Verify(ctx context.Context, req *sdk.VerifyRequest) (*sdk.VerifyResponse, error) {
	resp, err := c.c.Verify(ctx, &pb.VerifyRequest{TenantId: req.TenantID})
	if err != nil {
		if notServed(err) {
			return nil, unimplemented(err, "plugin does not implement Verify (it answers UNIMPLEMENTED: built before the Verify RPC, or written without it)")
		}
		return nil, fromStatus(err)
	}
	return &sdk.VerifyResponse{Checks: proofFromPB(resp.GetChecks())}, nil
}

// The daemon's client for a deleter is always a Planner and a Verifier;
// whether the plugin can plan or verify shows in the error.
var (
	_ sdk.Planner  = (*deleterClient)(nil)
	_ sdk.Verifier = (*deleterClient)(nil)
)
