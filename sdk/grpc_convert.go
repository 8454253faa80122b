package sdk

import (
	"math"
	"time"

	"github.com/lifecycled/lifecycled/sdk/internal/wire"
	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

// Conversions of the DLQSource messages between the sdk types and the wire,
// on the plugin's end; sdk/host has the daemon's, and the round-trip tests
// hold the two to each other.

func headersToPB(hs []Header) []*pb.Header {
	out := make([]*pb.Header, len(hs))
	for i, h := range hs {
		out[i] = &pb.Header{Key: h.Key, Value: h.Value, ValueNull: h.Value == nil, Type: h.Type}
	}
	return out
}

func headersFromPB(hs []*pb.Header) []Header {
	if len(hs) == 0 {
		return nil
	}
	out := make([]Header, len(hs))
	for i, h := range hs {
		out[i] = Header{Key: h.GetKey(), Value: wire.Bytes(h.GetValue(), h.GetValueNull()), Type: h.GetType()}
	}
	return out
}

func positionToPB(p Position) *pb.Position {
	return &pb.Position{Topic: p.Topic, Id: p.ID, Display: validUTF8(p.Display)}
}

func positionFromPB(p *pb.Position) Position {
	return Position{Topic: p.GetTopic(), ID: p.GetId(), Display: p.GetDisplay()}
}

func originToPB(o Origin) *pb.Origin {
	out := &pb.Origin{Destination: validUTF8(o.Destination), DestinationFrom: validUTF8(o.DestinationFrom), DestinationConfigured: o.DestinationConfigured,
		DestinationProblem: validUTF8(o.DestinationProblem), ErrorMessage: validUTF8(o.ErrorMessage),
		ErrorClass: validUTF8(o.ErrorClass), Attempts: int32(min(max(o.Attempts, 0), math.MaxInt32))}
	if !o.FirstFailedAt.IsZero() {
		out.FirstFailedUnixMs = o.FirstFailedAt.UnixMilli()
	}
	return out
}

func timestampToPB(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func deadLetterToPB(m DeadLetter) *pb.DeadLetter {
	return &pb.DeadLetter{
		Position: positionToPB(m.Position), Key: m.Key, KeyNull: m.Key == nil,
		Headers: headersToPB(m.Headers), Value: m.Value, ValueNull: m.Value == nil, TimestampUnixMs: timestampToPB(m.Timestamp),
		Origin: originToPB(m.Origin), Redelivered: m.Redelivered,
	}
}

func traitsToPB(t SourceTraits) *pb.SourceTraits {
	return &pb.SourceTraits{Acks: pb.SourceTraits_Acks(t.Acks), Positions: pb.SourceTraits_Positions(t.Positions),
		HeaderOrderKept: t.HeaderOrderKept, TypedHeaders: t.TypedHeaders}
}
