package host

import (
	"context"
	"io"

	"github.com/lifecycled/lifecycled/sdk"
	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

// deleterClient is the daemon's end of a TenantDeleter connection.
type deleterClient struct {
	c pb.TenantDeleterClient
}

func (c *deleterClient) Configure(ctx context.Context, req *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	return configureCall(ctx, req, c.c.Configure)
}

func (c *deleterClient) Count(ctx context.Context, req *sdk.CountRequest) (*sdk.CountResponse, error) {
	resp, err := c.c.Count(ctx, &pb.CountRequest{TenantId: req.TenantID})
	if err != nil {
		return nil, fromStatus(err)
	}
	return &sdk.CountResponse{Count: resp.GetCount(), Breakdown: resp.GetBreakdown()}, nil
}

func (c *deleterClient) Delete(ctx context.Context, req *sdk.DeleteRequest, progress sdk.Progress) (*sdk.DeleteResponse, error) {
	stream, err := c.c.Delete(ctx, &pb.DeleteRequest{TenantId: req.TenantID, PlanFingerprint: req.PlanFingerprint})
	if err != nil {
		return nil, fromStatus(err)
	}
	var lastProgress int64 = -1
	for {
		ev, err := stream.Recv()
		if err == io.EOF {
			return nil, &sdk.Error{Class: sdk.ClassRetryable, Code: sdk.CodeInternal, Message: "plugin ended the delete stream without a result"}
		}
		if err != nil {
			e := fromStatus(err).(*sdk.Error)
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
			return &sdk.DeleteResponse{DeletedCount: x.Result.GetDeletedCount(), Breakdown: x.Result.GetBreakdown(),
				Proof: proofFromPB(x.Result.GetProof())}, nil
		}
	}
}
