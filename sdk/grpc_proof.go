package sdk

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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

func proofFromPB(checks []*pb.ProofCheck) []ProofCheck {
	var out []ProofCheck
	for _, c := range checks {
		out = append(out, ProofCheck{Kind: ProofKind(c.GetKind()), Target: c.GetTarget(),
			Checked: c.GetChecked(), Found: c.GetFound(), Detail: c.GetDetail()})
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

// Verify calls the plugin's Verify. A plugin built before the Verify RPC
// (or one in another language whose servicer leaves it out) answers
// UNIMPLEMENTED without our error detail; that becomes an Unsupported
// error (errors.Is(err, ErrUnsupported)), like a Go plugin whose deleter
// is not a Verifier.
func (c *deleterClient) Verify(ctx context.Context, req *VerifyRequest) (*VerifyResponse, error) {
	resp, err := c.c.Verify(ctx, &pb.VerifyRequest{TenantId: req.TenantID})
	if err != nil {
		if st, ok := status.FromError(err); ok && st.Code() == codes.Unimplemented && len(st.Details()) == 0 {
			return nil, &Error{Class: ClassPermanent, Code: CodeUnsupported,
				Message: "plugin does not implement Verify (it answers UNIMPLEMENTED: built before the Verify RPC, or written without it)", cause: err}
		}
		return nil, FromStatus(err)
	}
	return &VerifyResponse{Checks: proofFromPB(resp.GetChecks())}, nil
}

// The daemon's client for a deleter is always a Verifier; whether the
// plugin can verify shows in the error.
var _ Verifier = (*deleterClient)(nil)
