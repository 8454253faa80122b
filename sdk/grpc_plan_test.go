package sdk_test

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/hashicorp/go-plugin"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/host"
	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

// countOnly is a sdk.TenantDeleter that is not a sdk.Planner.
type countOnly struct{}

func (countOnly) Configure(context.Context, *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	return &sdk.ConfigureResponse{}, nil
}
func (countOnly) Count(context.Context, *sdk.CountRequest) (*sdk.CountResponse, error) {
	return &sdk.CountResponse{Count: 3}, nil
}
func (countOnly) Delete(context.Context, *sdk.DeleteRequest, sdk.Progress) (*sdk.DeleteResponse, error) {
	return &sdk.DeleteResponse{}, nil
}

// planner answers Plan with plan or err, and records the tenant asked for.
type planner struct {
	countOnly
	plan  *sdk.PlanResponse
	err   error
	panic string
	asked string
}

func (p *planner) Plan(_ context.Context, req *sdk.PlanRequest) (*sdk.PlanResponse, error) {
	p.asked = req.TenantID
	if p.panic != "" {
		panic(p.panic)
	}
	return p.plan, p.err
}

// deleterClient is what sdk/host's client for a deleter is.
type deleterClient interface {
	sdk.TenantDeleter
	sdk.Planner
	sdk.Verifier
}

// serveDeleter runs srv (a TenantDeleterServer, or a narrower service
// description when desc is not nil) behind a real gRPC server and returns
// the daemon's client for it.
func serveDeleter(t *testing.T, desc *grpc.ServiceDesc, srv any) deleterClient {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := grpc.NewServer()
	if desc == nil {
		desc = &pb.TenantDeleter_ServiceDesc
	}
	s.RegisterService(desc, srv)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return daemonEnd(t, sdk.KindTenantDeleter, 0, conn).(deleterClient)
}

// daemonEnd is sdk/host's client of kind on conn, as go-plugin makes it.
func daemonEnd(t *testing.T, kind string, maxMessageBytes int, conn *grpc.ClientConn) any {
	t.Helper()
	glue := host.PluginSets(maxMessageBytes)[sdk.ProtocolVersion][kind].(plugin.GRPCPlugin)
	c, err := glue.GRPCClient(context.Background(), nil, conn)
	require.NoError(t, err)
	return c
}

func newDeleterServer(impl sdk.TenantDeleter) pb.TenantDeleterServer {
	return sdk.NewDeleterServer(impl)
}

func TestPlanCrossesTheWireUnchanged(t *testing.T) {
	want := &sdk.PlanResponse{
		Steps: []sdk.PlanStep{
			{Target: "public.order_lines", Via: "FK order_lines.order_id -> orders", Expected: 7},
			{Target: "public.orders", Via: "tenant column tenant_id", Expected: 2},
			{Target: "tenant:{id}:*", Via: "SCAN MATCH tenant:{id}:*", Expected: 0},
			{Target: "big", Via: "tenant column t", Expected: 1 << 40},
		},
		Fingerprint: "sha256:0123",
		Notes:       []string{"GSI by_email considered: not keyed by the tenant"},
	}
	impl := &planner{plan: want}
	c := serveDeleter(t, nil, newDeleterServer(impl))
	got, err := c.Plan(context.Background(), &sdk.PlanRequest{TenantID: "Tenant 'A' *"})
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, "Tenant 'A' *", impl.asked)
	require.Equal(t, int64(7+2+1<<40), got.Total())
}

func TestPlanEmptyPlanIsNotAnError(t *testing.T) {
	c := serveDeleter(t, nil, newDeleterServer(&planner{plan: &sdk.PlanResponse{Fingerprint: "f"}}))
	got, err := c.Plan(context.Background(), &sdk.PlanRequest{TenantID: "t"})
	require.NoError(t, err)
	require.Empty(t, got.Steps)
	require.Equal(t, int64(0), got.Total())
	require.Equal(t, "f", got.Fingerprint)
}

// A target that is not UTF-8 (a Redis pattern is bytes) must not fail the
// whole response: proto3 strings refuse invalid UTF-8.
func TestPlanInvalidUTF8IsReplacedNotFatal(t *testing.T) {
	impl := &planner{plan: &sdk.PlanResponse{Steps: []sdk.PlanStep{{Target: "k\xff:*", Via: "SCAN MATCH k\xff:*", Expected: 1}},
		Fingerprint: "f\xfe", Notes: []string{"n\xff"}}}
	c := serveDeleter(t, nil, newDeleterServer(impl))
	got, err := c.Plan(context.Background(), &sdk.PlanRequest{TenantID: "t"})
	require.NoError(t, err)
	require.Equal(t, "k\uFFFD:*", got.Steps[0].Target)
	require.Equal(t, "SCAN MATCH k\uFFFD:*", got.Steps[0].Via)
	require.Equal(t, "f\uFFFD", got.Fingerprint)
	require.Equal(t, []string{"n\uFFFD"}, got.Notes)
}

func TestPlanOfANonPlannerIsUnsupported(t *testing.T) {
	c := serveDeleter(t, nil, newDeleterServer(countOnly{}))
	_, err := c.Plan(context.Background(), &sdk.PlanRequest{TenantID: "t"})
	require.ErrorIs(t, err, sdk.ErrUnsupported)
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err))
	require.Contains(t, err.Error(), "does not implement Plan")
}

// A plugin built before the Plan RPC has no such method in its service:
// gRPC answers UNIMPLEMENTED without our detail.
func TestPlanOfAnOldPluginIsUnsupported(t *testing.T) {
	old := pb.TenantDeleter_ServiceDesc
	old.Methods = nil
	for _, m := range pb.TenantDeleter_ServiceDesc.Methods {
		if m.MethodName != "Plan" {
			old.Methods = append(old.Methods, m)
		}
	}
	require.Len(t, old.Methods, len(pb.TenantDeleter_ServiceDesc.Methods)-1)
	c := serveDeleter(t, &old, newDeleterServer(&planner{plan: &sdk.PlanResponse{Fingerprint: "never served"}}))
	// The old plugin still counts...
	n, err := c.Count(context.Background(), &sdk.CountRequest{TenantID: "t"})
	require.NoError(t, err)
	require.Equal(t, int64(3), n.Count)
	// ...but cannot plan.
	_, err = c.Plan(context.Background(), &sdk.PlanRequest{TenantID: "t"})
	require.ErrorIs(t, err, sdk.ErrUnsupported)
	require.Equal(t, sdk.ClassPermanent, sdk.ClassOf(err))
	require.Contains(t, err.Error(), "built before the Plan RPC")
}

// A plan that fails closed keeps its meaning across the hop: the daemon
// must tell "the schema drifted" (permanent, config) from "the store is
// down" (retryable).
func TestPlanErrorsKeepClassAndCode(t *testing.T) {
	for name, tc := range map[string]struct {
		err   error
		code  sdk.Code
		class sdk.Class
	}{
		"drift":       {sdk.InvalidConfig(sdk.FieldError{Field: "tables", Problem: `table "public.audit" has the tenant column but is not listed`}), sdk.CodeInvalidConfig, sdk.ClassPermanent},
		"unavailable": {sdk.Unavailable(errors.New("connection refused")), sdk.CodeUnavailable, sdk.ClassRetryable},
		"bad id":      {sdk.InvalidArgument("tenant id %q does not match", "x"), sdk.CodeInvalidArgument, sdk.ClassPermanent},
	} {
		t.Run(name, func(t *testing.T) {
			c := serveDeleter(t, nil, newDeleterServer(&planner{err: tc.err}))
			_, err := c.Plan(context.Background(), &sdk.PlanRequest{TenantID: "t"})
			var e *sdk.Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, tc.code, e.Code)
			require.Equal(t, tc.class, e.Class)
			require.Equal(t, tc.err.Error(), err.Error())
		})
	}
}

func TestPlanPanicAndNilPlanAreInternalErrors(t *testing.T) {
	c := serveDeleter(t, nil, newDeleterServer(&planner{panic: "boom"}))
	_, err := c.Plan(context.Background(), &sdk.PlanRequest{TenantID: "t"})
	var e *sdk.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, sdk.CodeInternal, e.Code)
	require.Contains(t, err.Error(), "plugin panicked in Plan: boom")

	c = serveDeleter(t, nil, newDeleterServer(&planner{}))
	_, err = c.Plan(context.Background(), &sdk.PlanRequest{TenantID: "t"})
	require.ErrorAs(t, err, &e)
	require.Equal(t, sdk.CodeInternal, e.Code)
	require.Contains(t, err.Error(), "no plan and no error")
}

type deleteRecorder struct {
	countOnly
	got *sdk.DeleteRequest
}

func (d *deleteRecorder) Delete(_ context.Context, req *sdk.DeleteRequest, _ sdk.Progress) (*sdk.DeleteResponse, error) {
	d.got = req
	return &sdk.DeleteResponse{}, nil
}

func TestDeletePlanFingerprintCrossesTheWire(t *testing.T) {
	impl := &deleteRecorder{}
	c := serveDeleter(t, nil, newDeleterServer(impl))
	_, err := c.Delete(context.Background(), &sdk.DeleteRequest{TenantID: "t", PlanFingerprint: "sha256:ab"}, nil)
	require.NoError(t, err)
	require.Equal(t, &sdk.DeleteRequest{TenantID: "t", PlanFingerprint: "sha256:ab"}, impl.got)
	_, err = c.Delete(context.Background(), &sdk.DeleteRequest{TenantID: "t"}, nil)
	require.NoError(t, err)
	require.Equal(t, &sdk.DeleteRequest{TenantID: "t"}, impl.got)
}

// configureRecorder keeps the sdk.ConfigureRequest it received.
type configureRecorder struct {
	countOnly
	got *sdk.ConfigureRequest
}

func (d *configureRecorder) Configure(_ context.Context, req *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	d.got = req
	return &sdk.ConfigureResponse{}, nil
}

func TestConfigureRequestCarriesTheTenantIDFormat(t *testing.T) {
	for _, format := range []string{"", "uuid", `^[a-z:]+$`} {
		impl := &configureRecorder{}
		c := serveDeleter(t, nil, newDeleterServer(impl))
		_, err := c.Configure(context.Background(), &sdk.ConfigureRequest{Name: "redis:sessions", Config: map[string]any{"a": "b"}, TenantIDFormat: format})
		require.NoError(t, err)
		require.Equal(t, &sdk.ConfigureRequest{Name: "redis:sessions", Config: map[string]any{"a": "b"}, TenantIDFormat: format}, impl.got)
	}
}
