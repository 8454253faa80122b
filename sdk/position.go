package sdk

import (
	"encoding/binary"
	"fmt"
)

// Limits of a Position; the daemon refuses a message past them.
const (
	MaxPositionIDBytes      = 64
	MaxPositionDisplayBytes = 128
)

// logPositionLen is the length of a LogPosition id: a 4-byte partition and
// an 8-byte offset, both big-endian, so that ids compare bytewise as
// (partition, offset) do for the non-negative values a log has.
const logPositionLen = 12

// LogPosition is the position of a record in a partitioned log (Kafka,
// Redpanda, a Kinesis shard): the id is the partition and the offset, and
// it reads "p<partition>@<offset>". The daemon read protocol 2 positions
// this way, so a source that moves to protocol 3 with LogPosition keeps
// recognising what it stored before.
func LogPosition(topic string, partition int32, offset int64) Position {
	id := make([]byte, logPositionLen)
	binary.BigEndian.PutUint32(id[:4], uint32(partition))
	binary.BigEndian.PutUint64(id[4:], uint64(offset))
	return Position{Topic: topic, ID: id, Display: fmt.Sprintf("p%d@%d", partition, offset)}
}

// ParseLogPosition reads an id LogPosition made; ok is false for any other.
func ParseLogPosition(id []byte) (partition int32, offset int64, ok bool) {
	if len(id) != logPositionLen {
		return 0, 0, false
	}
	return int32(binary.BigEndian.Uint32(id[:4])), int64(binary.BigEndian.Uint64(id[4:])), true
}

// Acks is how a source acknowledges what the daemon stored (Commit).
type Acks int

const (
	// AcksUnspecified is refused: a source must say.
	AcksUnspecified Acks = iota
	// AcksCumulative: committing a position commits every earlier one of
	// its ordering scope (Kafka offsets per partition). The daemon does not
	// commit again after a failed Commit: the next covers it.
	AcksCumulative
	// AcksPerMessage: each position is acknowledged on its own (AMQP
	// basic.ack, a row marked taken). A failed Commit must leave the
	// messages to be delivered again (close the channel): the daemon stores
	// the redelivery once.
	AcksPerMessage
)

func (a Acks) String() string {
	switch a {
	case AcksCumulative:
		return "cumulative"
	case AcksPerMessage:
		return "per-message"
	}
	return "unspecified"
}

// Positions is what a source's position ids identify.
type Positions int

const (
	// PositionsUnspecified is refused: a source must say.
	PositionsUnspecified Positions = iota
	// PositionsStable: a message has the same id on every delivery (an
	// offset, a row id). The daemon stores a delivery at a stored id with
	// the same digest (key, headers, value, timestamp) once.
	PositionsStable
	// PositionsPerDelivery: the broker has no stable id, so an id names one
	// delivery (random, never reused). A redelivery must be flagged
	// (DeadLetter.Redelivered): the daemon matches it to a stored message
	// with the same digest whose Commit has not succeeded, one for one, so
	// that two identical messages stay two. Needs AcksPerMessage.
	PositionsPerDelivery
)

func (p Positions) String() string {
	switch p {
	case PositionsStable:
		return "stable"
	case PositionsPerDelivery:
		return "per-delivery"
	}
	return "unspecified"
}

// SourceTraits is what a DLQSource declares in its ConfigureResponse.
type SourceTraits struct {
	Acks      Acks
	Positions Positions
	// HeaderOrderKept: headers come back in the order they were read, and
	// their order is part of a message (Kafka). False for a broker whose
	// headers are a map (AMQP tables): the daemon then digests them sorted,
	// and the kit does not ask for their order.
	HeaderOrderKept bool
	// TypedHeaders: Header.Type is meaningful, and must come back on
	// republish exactly as read.
	TypedHeaders bool
}

// Check says what is wrong with the traits, nil when nothing is.
func (t SourceTraits) Check() error {
	switch {
	case t.Acks != AcksCumulative && t.Acks != AcksPerMessage:
		return fmt.Errorf("the source declares no acknowledgement semantics (SourceTraits.Acks is %s)", t.Acks)
	case t.Positions != PositionsStable && t.Positions != PositionsPerDelivery:
		return fmt.Errorf("the source declares no position semantics (SourceTraits.Positions is %s)", t.Positions)
	case t.Positions == PositionsPerDelivery && t.Acks != AcksPerMessage:
		return fmt.Errorf("per-delivery positions need per-message acknowledgements: a cumulative commit cannot name the deliveries it covers")
	}
	return nil
}

// Protocol2Traits are what a protocol 2 source was: Kafka offsets.
var Protocol2Traits = SourceTraits{Acks: AcksCumulative, Positions: PositionsStable, HeaderOrderKept: true}
