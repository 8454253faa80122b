package sdk

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

// countOnly is a TenantDeleter that is not a Planner.
type countOnly struct{}

func (countOnly) Configure(context.Context, *ConfigureRequest) (*ConfigureResponse, error) {
	return &ConfigureResponse{}, nil
}
func (countOnly) Count(context.Context, *CountRequest) (*CountResponse, error) {
	return &CountResponse{Count: 3}, nil
}
func (countOnly) Delete(context.Context, *DeleteRequest, Progress) (*DeleteResponse, error) {
	return &DeleteResponse{}, nil
}

// planner answers Plan with plan or err, and records the tenant asked for.
type planner struct {
	countOnly
	plan  *PlanResponse
	err   error
	panic string
	asked string
}

func (p *planner) Plan(_ context.Context, req *PlanRequest) (*PlanResponse, error) {
	p.asked = req.TenantID
	if p.panic != "" {
		panic(p.panic)
	}
	return p.plan, p.err
}

// serveDeleter runs srv (a TenantDeleterServer, or a narrower service
// description when desc is not nil) behind a real gRPC server and returns
// the daemon's client for it.
func serveDeleter(t *testing.T, desc *grpc.ServiceDesc, srv any) *deleterClient {
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
	return &deleterClient{c: pb.NewTenantDeleterClient(conn)}
}

func newDeleterServer(impl TenantDeleter) *deleterServer {
	return &deleterServer{impl: impl, handlerBase: handlerBase{log: hclog.NewNullLogger(), scrub: &Scrubber{}}}
}

func TestPlanCrossesTheWireUnchanged(t *testing.T) {
	want := &PlanResponse{
		Steps: []PlanStep{
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
	got, err := c.Plan(context.Background(), &PlanRequest{TenantID: "Tenant 'A' *"})
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, "Tenant 'A' *", impl.asked)
	require.Equal(t, int64(7+2+1<<40), got.Total())
}

func TestPlanEmptyPlanIsNotAnError(t *testing.T) {
	c := serveDeleter(t, nil, newDeleterServer(&planner{plan: &PlanResponse{Fingerprint: "f"}}))
	got, err := c.Plan(context.Background(), &PlanRequest{TenantID: "t"})
	require.NoError(t, err)
	require.Empty(t, got.Steps)
	require.Equal(t, int64(0), got.Total())
	require.Equal(t, "f", got.Fingerprint)
}

// A target that is not UTF-8 (a Redis pattern is bytes) must not fail the
// whole response: proto3 strings refuse invalid UTF-8.
func TestPlanInvalidUTF8IsReplacedNotFatal(t *testing.T) {
	impl := &planner{plan: &PlanResponse{Steps: []PlanStep{{Target: "k\xff:*", Via: "SCAN MATCH k\xff:*", Expected: 1}},
		Fingerprint: "f\xfe", Notes: []string{"n\xff"}}}
	c := serveDeleter(t, nil, newDeleterServer(impl))
	got, err := c.Plan(context.Background(), &PlanRequest{TenantID: "t"})
	require.NoError(t, err)
	require.Equal(t, "k\uFFFD:*", got.Steps[0].Target)
	require.Equal(t, "SCAN MATCH k\uFFFD:*", got.Steps[0].Via)
	require.Equal(t, "f\uFFFD", got.Fingerprint)
	require.Equal(t, []string{"n\uFFFD"}, got.Notes)
}

func TestPlanOfANonPlannerIsUnsupported(t *testing.T) {
	c := serveDeleter(t, nil, newDeleterServer(countOnly{}))
	_, err := c.Plan(context.Background(), &PlanRequest{TenantID: "t"})
	require.ErrorIs(t, err, ErrUnsupported)
	require.Equal(t, ClassPermanent, ClassOf(err))
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
	c := serveDeleter(t, &old, newDeleterServer(&planner{plan: &PlanResponse{Fingerprint: "never served"}}))
	// The old plugin still counts...
	n, err := c.Count(context.Background(), &CountRequest{TenantID: "t"})
	require.NoError(t, err)
	require.Equal(t, int64(3), n.Count)
	// ...but cannot plan.
	_, err = c.Plan(context.Background(), &PlanRequest{TenantID: "t"})
	require.ErrorIs(t, err, ErrUnsupported)
	require.Equal(t, ClassPermanent, ClassOf(err))
	require.Contains(t, err.Error(), "built before the Plan RPC")
}

// A plan that fails closed keeps its meaning across the hop: the daemon
// must tell "the schema drifted" (permanent, config) from "the store is
// down" (retryable).
func TestPlanErrorsKeepClassAndCode(t *testing.T) {
	for name, tc := range map[string]struct {
		err   error
		code  Code
		class Class
	}{
		"drift":       {InvalidConfig(FieldError{Field: "tables", Problem: `table "public.audit" has the tenant column but is not listed`}), CodeInvalidConfig, ClassPermanent},
		"unavailable": {Unavailable(errors.New("connection refused")), CodeUnavailable, ClassRetryable},
		"bad id":      {InvalidArgument("tenant id %q does not match", "x"), CodeInvalidArgument, ClassPermanent},
	} {
		t.Run(name, func(t *testing.T) {
			c := serveDeleter(t, nil, newDeleterServer(&planner{err: tc.err}))
			_, err := c.Plan(context.Background(), &PlanRequest{TenantID: "t"})
			var e *Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, tc.code, e.Code)
			require.Equal(t, tc.class, e.Class)
			require.Equal(t, tc.err.Error(), err.Error())
		})
	}
}

func TestPlanPanicAndNilPlanAreInternalErrors(t *testing.T) {
	c := serveDeleter(t, nil, newDeleterServer(&planner{panic: "boom"}))
	_, err := c.Plan(context.Background(), &PlanRequest{TenantID: "t"})
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, CodeInternal, e.Code)
	require.Contains(t, err.Error(), "plugin panicked in Plan: boom")

	c = serveDeleter(t, nil, newDeleterServer(&planner{}))
	_, err = c.Plan(context.Background(), &PlanRequest{TenantID: "t"})
	require.ErrorAs(t, err, &e)
	require.Equal(t, CodeInternal, e.Code)
	require.Contains(t, err.Error(), "no plan and no error")
}
