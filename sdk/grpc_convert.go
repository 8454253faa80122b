package sdk

import (
	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

// Conversions of the DLQSource messages between the sdk types and the wire.

func headersToPB(hs []Header) []*pb.Header {
	out := make([]*pb.Header, len(hs))
	for i, h := range hs {
		out[i] = &pb.Header{Key: h.Key, Value: h.Value}
	}
	return out
}

func headersFromPB(hs []*pb.Header) []Header {
	if len(hs) == 0 {
		return nil
	}
	out := make([]Header, len(hs))
	for i, h := range hs {
		out[i] = Header{Key: h.GetKey(), Value: h.GetValue()}
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
func keyFromPB(key []byte, null bool) []byte {
	if null {
		return nil
	}
	if key == nil {
		return []byte{}
	}
	return key
}

func deadLetterToPB(m DeadLetter) *pb.DeadLetter {
	return &pb.DeadLetter{
		Position: positionToPB(m.Position), Key: m.Key, KeyNull: m.Key == nil,
		Headers: headersToPB(m.Headers), Value: m.Value, TimestampUnixMs: m.Timestamp.UnixMilli(),
		OriginalTopic: m.OriginalTopic,
	}
}
