package sdk

import (
	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

// Conversions of the DLQSource messages between the sdk types and the wire.

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
		out[i] = Header{Key: h.GetKey(), Value: valueFromPB(h.GetValue(), h.GetValueNull())}
	}
	return out
}

func positionToPB(p Position) *pb.Position {
	return &pb.Position{Topic: p.Topic, Partition: p.Partition, Offset: p.Offset}
}

func positionFromPB(p *pb.Position) Position {
	return Position{Topic: p.GetTopic(), Partition: p.GetPartition(), Offset: p.GetOffset()}
}

// keyFromPB keeps the difference between no key and an empty key.
func keyFromPB(key []byte, null bool) []byte { return valueFromPB(key, null) }

// valueFromPB keeps the difference between null (nil) and empty bytes,
// which proto3 bytes fields cannot tell apart by themselves: a peer built
// before the *_null fields sends none, and its values arrive as empty, as
// they always did.
func valueFromPB(b []byte, null bool) []byte {
	if null {
		return nil
	}
	if b == nil {
		return []byte{}
	}
	return b
}

func deadLetterToPB(m DeadLetter) *pb.DeadLetter {
	return &pb.DeadLetter{
		Position: positionToPB(m.Position), Key: m.Key, KeyNull: m.Key == nil,
		Headers: headersToPB(m.Headers), Value: m.Value, ValueNull: m.Value == nil, TimestampUnixMs: m.Timestamp.UnixMilli(),
		OriginalTopic: m.OriginalTopic,
	}
}
