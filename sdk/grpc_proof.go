package sdk

import (
	"context"
	"errors"

	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

// errNotVerifier is what the server answers for a deleter that does not
// implement Verifier.
var errNotVerifier = errors.New("this deleter does not implement Verify")

func proofToPB(checks []ProofCheck) []*pb.ProofCheck {
	var out []*pb.ProofCheck
	for _, c := range checks {
		out = append(out, &pb.ProofCheck{Kind: validUTF8(string(c.Kind)), Target: validUTF8(c.Target),
			Checked: c.Checked, Found: c.Found, Detail: validUTF8(c.Detail)})
	}
	return out
}

// Verify serves the Verify RPC: Unsupported when the deleter is not a
// Verifier.
func (s *deleterServer) Verify(ctx context.Context, req *pb.VerifyRequest) (*pb.VerifyResponse, error) {
	return serveOptional(s, "Verify", errNotVerifier, "proof", func(v Verifier) (*VerifyResponse, error) {
		return v.Verify(ctx, &VerifyRequest{TenantID: req.GetTenantId()})
	}, func(resp *VerifyResponse) *pb.VerifyResponse {
		return &pb.VerifyResponse{Checks: proofToPB(resp.Checks)}
	})
}
