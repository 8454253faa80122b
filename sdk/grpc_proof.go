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
	var out *pb.VerifyResponse
	err := s.guard("Verify", func() error {
		v, ok := s.impl.(Verifier)
		if !ok {
			return Unsupported(errNotVerifier)
		}
		resp, err := v.Verify(ctx, &VerifyRequest{TenantID: req.GetTenantId()})
		if err != nil {
			return err
		}
		if resp == nil {
			return &Error{Class: ClassPermanent, Code: CodeInternal, Message: "plugin returned no proof and no error"}
		}
		out = &pb.VerifyResponse{Checks: proofToPB(resp.Checks)}
		return nil
	})
	return out, err
}
