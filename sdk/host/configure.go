package host

import (
	"context"
	"encoding/json"

	"google.golang.org/grpc"

	"github.com/lifecycled/lifecycled/sdk"
	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

// What the daemon's clients of both plugin kinds share.

func configureRequestPB(req *sdk.ConfigureRequest) (*pb.ConfigureRequest, error) {
	cfg := req.Config
	if cfg == nil {
		cfg = map[string]any{}
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, sdk.InvalidConfig(sdk.FieldError{Field: "config", Problem: err.Error()})
	}
	return &pb.ConfigureRequest{Name: req.Name, ConfigJson: b, TenantIdFormat: req.TenantIDFormat}, nil
}

// configureCall is Configure on the daemon's side, for either plugin kind.
func configureCall(ctx context.Context, req *sdk.ConfigureRequest,
	call func(context.Context, *pb.ConfigureRequest, ...grpc.CallOption) (*pb.ConfigureResponse, error)) (*sdk.ConfigureResponse, error) {
	r, err := configureRequestPB(req)
	if err != nil {
		return nil, err
	}
	resp, err := call(ctx, r)
	if err != nil {
		return nil, fromStatus(err)
	}
	out := &sdk.ConfigureResponse{PluginVersion: resp.GetPluginVersion(), Warnings: resp.GetWarnings()}
	if t := resp.GetSource(); t != nil {
		out.Source = sdk.SourceTraits{Acks: sdk.Acks(t.GetAcks()), Positions: sdk.Positions(t.GetPositions()),
			HeaderOrderKept: t.GetHeaderOrderKept(), TypedHeaders: t.GetTypedHeaders()}
	}
	return out, nil
}
