package dlq

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/kafkaconv"
)

// Header names this package reads and writes.
const (
	// HeaderID and HeaderRetryCount are added to every republished message,
	// so that a replay that fails again and comes back is matched to its record.
	HeaderID         = sdk.HeaderDLQID
	HeaderRetryCount = sdk.HeaderRetryCount
)

const (
	maxTopicLength      = kafkaconv.MaxTopicLength
	maxErrorLength      = 64 << 10
	maxHeaderTypeLength = 64
)

// UnknownError is the error message of a dead letter that carries none.
const UnknownError = "unknown error"

// storable is s as the state store can keep text: valid UTF-8, no NUL
// (which PostgreSQL's text refuses), at most max bytes.
func storable(s string, max int) string {
	return cut(strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", ""), max)
}

// storedName is the name of the topic a source read a message from, as
// the store can keep it. Unlike text, it is not trimmed: "orders " and
// "orders" are two queues to a broker that allows spaces.
func storedName(s string) string { return storable(s, maxTopicLength) }

// sanitize makes header text safe to store (storable), without the
// spaces around it.
func sanitize(s string, max int) string { return strings.TrimSpace(storable(s, max)) }

// producedAtRange is what both state stores can hold as a timestamp;
// outside it the producer's timestamp is not kept (a Kafka timestamp may be
// any int64 of milliseconds, and year 300000 once stopped a whole intake).
var (
	producedAtMin = time.Unix(1, 0)
	producedAtMax = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
)

// NoOriginalTopicPrefix starts the reason (last_error) of a message that
// has no original topic.
const NoOriginalTopicPrefix = "no original topic: "

// Interpret turns a dead letter from a source into what the store keeps. It
// never fails and never drops anything: headers, key and value are kept as
// they came; the origin is the source's (sdk.Origin), held to the store's
// limits; the error is the source's message, else its class, else "unknown
// error"; x-dlq-id names the record a returning replay refers to (the store
// decides whether it really is one of ours). A message that was too large
// to cross whole is kept as what arrived, DEAD, with the reason.
//
// A message has no original topic (OriginalTopic "", with the reason in
// LastError) when the source names none, or names a dead-letter topic: its
// own (isDLQTopic is then not even asked) or any other that isDLQTopic
// knows. Republishing there would only put it back on a DLQ, where it
// would be taken in again.
func Interpret(source string, traits sdk.SourceTraits, d sdk.DeadLetter, now time.Time, isDLQTopic func(string) bool) Incoming {
	in := Incoming{
		Position:    positionOf(source, d),
		Key:         d.Key,
		Payload:     d.Value,
		Digest:      Digest(d, traits),
		Redelivered: d.Redelivered && traits.Positions == sdk.PositionsPerDelivery,
		PerDelivery: traits.Positions == sdk.PositionsPerDelivery,
	}
	if ts := d.Timestamp; !ts.Before(producedAtMin) && ts.Before(producedAtMax) {
		ts = ts.UTC()
		in.ProducedAt = &ts
	}
	for _, h := range d.Headers {
		in.Headers = append(in.Headers, Header{Key: h.Key, Value: h.Value, Type: storable(h.Type, maxHeaderTypeLength)})
	}
	o := d.Origin
	in.Origin.From = sanitize(o.DestinationFrom, maxTopicLength)
	in.Origin.Configured = o.DestinationConfigured
	namedBy := in.Origin.From
	if namedBy == "" {
		namedBy = "the source"
	}
	switch dest := sanitize(o.Destination, math.MaxInt); {
	case o.DestinationProblem != "":
		in.LastError = NoOriginalTopicPrefix + sanitize(o.DestinationProblem, maxErrorLength)
	case len(dest) > maxTopicLength:
		in.LastError = fmt.Sprintf("%s%s names a destination of %d bytes, longer than any (%d)", NoOriginalTopicPrefix, namedBy, len(dest), maxTopicLength)
	case dest == "":
		in.LastError = NoOriginalTopicPrefix + "the source names none for " + in.Position.Topic
	case dest == in.Position.Topic:
		in.LastError = NoOriginalTopicPrefix + namedBy + " names the DLQ topic itself"
	case isDLQTopic != nil && isDLQTopic(dest):
		in.LastError = NoOriginalTopicPrefix + namedBy + " names " + dest + ", a dead-letter topic"
	default:
		in.OriginalTopic = dest
	}
	in.Origin.ErrorClass = sanitize(o.ErrorClass, maxTopicLength)
	in.ErrorMessage = sanitize(o.ErrorMessage, maxErrorLength)
	if in.ErrorMessage == "" {
		in.ErrorMessage = in.Origin.ErrorClass
	}
	if in.ErrorMessage == "" {
		in.ErrorMessage = UnknownError
	}
	in.Origin.Attempts = max(o.Attempts, 0)
	if ts := o.FirstFailedAt; !ts.Before(producedAtMin) && ts.Before(producedAtMax) {
		ts = ts.UTC()
		in.Origin.FirstFailedAt = &ts
	}
	if v, ok := kafkaconv.Last(d.Headers, HeaderID); ok {
		if id, err := uuid.Parse(strings.TrimSpace(string(v))); err == nil {
			in.FeedbackOf = &id
			if v, ok := kafkaconv.Last(d.Headers, HeaderRetryCount); ok {
				if n, err := strconv.Atoi(strings.TrimSpace(string(v))); err == nil && n > 0 {
					in.FeedbackAttempt = n
				}
			}
		}
	}
	if d.Truncated {
		in.Payload, in.FeedbackOf, in.FeedbackAttempt, in.Truncated = nil, nil, 0, true
		in.LastError = fmt.Sprintf("the message was %d bytes, more than the plugin RPC limit ([plugins] max_message_bytes): "+
			"its value (and, if that was not enough, its key and headers) could not be kept, so it cannot be republished", d.OriginalSize)
		in.Dead = true
		in.Attempt = &Attempt{At: now, Outcome: OutcomeTruncated, Error: in.LastError}
	}
	return in
}

// positionOf is where d was read, as the store keeps it: the id the source
// gave, unless it cannot be kept as one (empty, or longer than
// sdk.MaxPositionIDBytes), when its SHA-256 stands in (of the id, else of
// the content), which is as stable as what it stands for.
func positionOf(source string, d sdk.DeadLetter) Position {
	p := Position{Source: source, Topic: storedName(d.Position.Topic), ID: d.Position.ID,
		Display: storable(d.Position.Display, sdk.MaxPositionDisplayBytes)}
	switch {
	case len(p.ID) == 0:
		sum := Digest(d, sdk.SourceTraits{HeaderOrderKept: true})
		p.ID = sum
		if p.Display == "" {
			p.Display = "content " + hex.EncodeToString(sum[:6])
		}
	case len(p.ID) > sdk.MaxPositionIDBytes:
		sum := sha256.Sum256(p.ID)
		p.ID = sum[:]
	}
	if p.Display == "" {
		p.Display = hex.EncodeToString(p.ID[:min(len(p.ID), sdk.MaxPositionDisplayBytes/2)])
	}
	return p
}

// Digest identifies what a source read at a position: SHA-256 over the
// key, the headers, the value and the timestamp, each length-prefixed (a
// missing key differs from an empty one). A redelivery of the position has
// the same digest; a message at the same position of a topic deleted and
// created again has another. Headers are taken in the order read when the
// source keeps it (traits.HeaderOrderKept), else sorted, and a header's
// type counts when it has one. A zero timestamp (none) counts as the Unix
// epoch, as protocol 2 sent it.
func Digest(d sdk.DeadLetter, traits sdk.SourceTraits) []byte {
	h := sha256.New()
	var n [8]byte
	field := func(b []byte, present bool) {
		if !present {
			h.Write([]byte{0})
			return
		}
		h.Write([]byte{1})
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field(d.Key, d.Key != nil)
	hs := d.Headers
	if !traits.HeaderOrderKept {
		hs = slices.Clone(hs)
		slices.SortStableFunc(hs, func(a, b sdk.Header) int {
			if c := bytes.Compare(a.Key, b.Key); c != 0 {
				return c
			}
			if c := bytes.Compare(a.Value, b.Value); c != 0 {
				return c
			}
			return strings.Compare(a.Type, b.Type)
		})
	}
	binary.BigEndian.PutUint64(n[:], uint64(len(hs)))
	h.Write(n[:])
	for _, hd := range hs {
		field(hd.Key, true)
		field(hd.Value, true)
		if hd.Type != "" {
			// Untyped headers digest as they did before types existed.
			h.Write([]byte{2})
			field([]byte(hd.Type), true)
		}
	}
	field(d.Value, true)
	var ms int64
	if !d.Timestamp.IsZero() {
		ms = d.Timestamp.UnixMilli()
	}
	binary.BigEndian.PutUint64(n[:], uint64(ms))
	h.Write(n[:])
	return h.Sum(nil)
}

// sdkHeaders are stored headers as a source takes them, types kept.
func sdkHeaders(hs []Header) []sdk.Header {
	out := make([]sdk.Header, len(hs))
	for i, h := range hs {
		out[i] = sdk.Header{Key: h.Key, Value: h.Value, Type: h.Type}
	}
	return out
}

// RepublishHeaders are the message's headers without earlier x-dlq-* values,
// plus this attempt's x-dlq-id and x-dlq-retry-count.
func RepublishHeaders(m *Message) []sdk.Header {
	out := make([]sdk.Header, 0, len(m.Headers)+2)
	for _, h := range m.Headers {
		if bytes.EqualFold(h.Key, []byte(HeaderID)) || bytes.EqualFold(h.Key, []byte(HeaderRetryCount)) {
			continue
		}
		out = append(out, sdk.Header{Key: h.Key, Value: h.Value, Type: h.Type})
	}
	return append(out,
		sdk.Header{Key: []byte(HeaderID), Value: []byte(m.ID.String())},
		sdk.Header{Key: []byte(HeaderRetryCount), Value: []byte(strconv.Itoa(m.RetryCount + 1))},
	)
}

// Degrade is a message as received, without what was made of it: no
// original topic (nothing it named can be trusted: it is never republished
// automatically), no producer timestamp, no returning-replay id, no JSON
// copy of its payload, and the store's refusal as its last error. Its
// position and digest stay, so a redelivery is still recognised.
func Degrade(m Incoming, storeErr error) Incoming {
	reason := sanitize(NoOriginalTopicPrefix+"stored as received: the state store refused what was read from its headers: "+storeErr.Error(), maxErrorLength)
	return Incoming{
		Position: m.Position, Digest: m.Digest, ErrorMessage: UnknownError,
		Key: m.Key, Headers: m.Headers, Payload: m.Payload, NoJSON: true,
		Truncated: m.Truncated, Dead: m.Dead, LastError: reason, Redelivered: m.Redelivered, PerDelivery: m.PerDelivery,
	}
}
