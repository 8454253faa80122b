package sdk

import (
	"context"
	"io"

	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

type deleterClient struct {
	c pb.TenantDeleterClient
}

func (c *deleterClient) Configure(ctx context.Context, req *ConfigureRequest) (*ConfigureResponse, error) {
	return configureCall(ctx, req, c.c.Configure)
}

func (c *deleterClient) Count(ctx context.Context, req *CountRequest) (*CountResponse, error) {
	resp, err := c.c.Count(ctx, &pb.CountRequest{TenantId: req.TenantID})
	if err != nil {
		return nil, FromStatus(err)
	}
	return &CountResponse{Count: resp.GetCount(), Breakdown: resp.GetBreakdown()}, nil
}

func (c *deleterClient) Delete(ctx context.Context, req *DeleteRequest, progress Progress) (*DeleteResponse, error) {
	stream, err := c.c.Delete(ctx, &pb.DeleteRequest{TenantId: req.TenantID, PlanFingerprint: req.PlanFingerprint})
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
			return &DeleteResponse{DeletedCount: x.Result.GetDeletedCount(), Breakdown: x.Result.GetBreakdown(),
				Proof: proofFromPB(x.Result.GetProof())}, nil
		}
	}
}
