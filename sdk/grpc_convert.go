package sdk

import (
	"github.com/lifecycled/lifecycled/sdk/internal/wire"
	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

// Conversions of the DLQSource messages between the sdk types and the wire,
// on the plugin's end; sdk/host has the daemon's, and the round-trip tests
// hold the two to each other.

func headersToPB(hs []Header) []*pb.Header {
	out := make([]*pb.Header, len(hs))
	for i, h := range hs {
		out[i] = &pb.Header{Key: h.Key, Value: h.Value, ValueNull: h.Value == nil}
	}
	return out
}

func headersFromPB(hs []*pb.Header) []Header {
	if len(hs) == 0 {
		return nil
	}
	out := make([]Header, len(hs))
	for i, h := range hs {
		out[i] = Header{Key: h.GetKey(), Value: wire.Bytes(h.GetValue(), h.GetValueNull())}
	}
	return out
}

func positionToPB(p Position) *pb.Position {
	return &pb.Position{Topic: p.Topic, Partition: p.Partition, Offset: p.Offset}
}

func positionFromPB(p *pb.Position) Position {
	return Position{Topic: p.GetTopic(), Partition: p.GetPartition(), Offset: p.GetOffset()}
}

func deadLetterToPB(m DeadLetter) *pb.DeadLetter {
	return &pb.DeadLetter{
		Position: positionToPB(m.Position), Key: m.Key, KeyNull: m.Key == nil,
		Headers: headersToPB(m.Headers), Value: m.Value, ValueNull: m.Value == nil, TimestampUnixMs: m.Timestamp.UnixMilli(),
		OriginalTopic: m.OriginalTopic,
	}
}
