package host_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/host"
	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

// protocol2Source answers as a DLQ source built for protocol 2 does: Kafka
// positions, the headers as read and the source's topic mapping, no traits.
type protocol2Source struct {
	pb.UnimplementedDLQSourceServer
	committed []*pb.Position
}

func (*protocol2Source) Configure(context.Context, *pb.ConfigureRequest) (*pb.ConfigureResponse, error) {
	return &pb.ConfigureResponse{PluginVersion: "old"}, nil
}

func (*protocol2Source) Fetch(context.Context, *pb.FetchRequest) (*pb.FetchResponse, error) {
	return &pb.FetchResponse{BatchId: 7, Messages: []*pb.DeadLetter{{
		Position: &pb.Position{Topic: "orders.dlq.v1", Partition: 2, Offset: 1041},
		Headers: []*pb.Header{
			{Key: []byte("kafka_dlt-original-topic"), Value: []byte("orders.events.v1")},
			{Key: []byte("kafka_dlt-exception-message"), Value: []byte("NPE")},
			{Key: []byte("kafka_dlt-exception-fqcn"), Value: []byte("java.lang.NullPointerException")},
		},
		Value: []byte("{}"), TimestampUnixMs: 1700000000000, OriginalTopic: "mapped.v1",
	}}}, nil
}

func (s *protocol2Source) Commit(_ context.Context, req *pb.CommitRequest) (*pb.CommitResponse, error) {
	s.committed = append(s.committed, req.GetPositions()...)
	return &pb.CommitResponse{}, nil
}

// A source built for protocol 2 keeps working: the daemon's end reads its
// Kafka positions as log positions, its origin from the headers by the Kafka
// conventions (what the daemon did itself under protocol 2), declares
// Kafka's traits for it, and commits partition and offset back.
func TestAProtocol2SourceIsReadAsProtocol2MeantIt(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	old := &protocol2Source{}
	srv := grpc.NewServer()
	pb.RegisterDLQSourceServer(srv, old)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///"+l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := host.PluginSets(0)[2][sdk.KindDLQSource].(plugin.GRPCPlugin).GRPCClient(ctx, nil, conn)
	if err != nil {
		t.Fatal(err)
	}
	src := c.(sdk.DLQSource)

	cfg, err := src.Configure(ctx, &sdk.ConfigureRequest{Name: "kafka"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Source != sdk.Protocol2Traits {
		t.Errorf("traits %+v, want Kafka's %+v", cfg.Source, sdk.Protocol2Traits)
	}
	// It predates the Health call: its store's health is unknown, not ok.
	if err := src.(sdk.HealthChecker).Health(ctx); !errors.Is(err, sdk.ErrUnsupported) {
		t.Errorf("Health of a plugin without it: %v, want Unsupported", err)
	}
	resp, err := src.Fetch(ctx, &sdk.FetchRequest{Max: 10, Wait: time.Millisecond})
	if err != nil || len(resp.Messages) != 1 {
		t.Fatalf("Fetch: %v, %d messages", err, len(resp.Messages))
	}
	m := resp.Messages[0]
	want := sdk.LogPosition("orders.dlq.v1", 2, 1041)
	if string(m.Position.ID) != string(want.ID) || m.Position.Display != "p2@1041" || m.Position.Topic != "orders.dlq.v1" {
		t.Errorf("position %+v, want %+v", m.Position, want)
	}
	wantOrigin := sdk.Origin{Destination: "orders.events.v1", DestinationFrom: "the header kafka_dlt-original-topic",
		ErrorMessage: "NPE", ErrorClass: "java.lang.NullPointerException"}
	if m.Origin != wantOrigin {
		t.Errorf("origin %+v, want %+v", m.Origin, wantOrigin)
	}
	if !m.Timestamp.Equal(time.UnixMilli(1700000000000)) {
		t.Errorf("timestamp %v", m.Timestamp)
	}
	if _, err := src.Commit(ctx, &sdk.CommitRequest{Positions: []sdk.Position{m.Position}}); err != nil {
		t.Fatal(err)
	}
	if len(old.committed) != 1 || old.committed[0].GetPartition() != 2 || old.committed[0].GetOffset() != 1041 ||
		len(old.committed[0].GetId()) != 0 {
		t.Errorf("committed %v, want partition 2 offset 1041 as protocol 2 has them", old.committed)
	}
}
