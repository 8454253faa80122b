package dlq

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/sdk"
)

// Header names this package reads and writes.
const (
	// HeaderID and HeaderRetryCount are added to every republished message,
	// so that a replay that fails again and comes back is matched to its record.
	HeaderID         = "x-dlq-id"
	HeaderRetryCount = "x-dlq-retry-count"
)

// Headers naming the original topic, in order of preference: Spring Kafka's
// DeadLetterPublishingRecoverer (KafkaHeaders.DLT_ORIGINAL_TOPIC), Spring's
// non-blocking retries (@RetryableTopic, KafkaHeaders.ORIGINAL_TOPIC), Kafka
// Connect's DLQ reporter (ERROR_HEADER_ORIG_TOPIC), and the plain
// convention of the source design.
var originalTopicHeaders = []string{"kafka_dlt-original-topic", "kafka_original-topic", "__connect.errors.topic", "original_topic"}

// errorConvention is a pair of headers one framework writes for a failure:
// the exception's message and, for when the message is empty, its class.
type errorConvention struct{ message, class string }

// Headers carrying the consumer's error, in order of preference. Value
// deserialisation or processing failures come before key deserialisation
// failures. docs/plugins.md has the table.
var errorConventions = []errorConvention{
	{message: "error"},
	{message: "kafka_dlt-exception-message", class: "kafka_dlt-exception-fqcn"},                     // Spring, dead-letter topic
	{message: "kafka_exception-message", class: "kafka_exception-fqcn"},                             // Spring, @RetryableTopic
	{message: "__connect.errors.exception.message", class: "__connect.errors.exception.class.name"}, // Kafka Connect
	{message: "kafka_dlt-key-exception-message", class: "kafka_dlt-key-exception-fqcn"},             // Spring, key deserialisation
	{message: "kafka_key-exception-message", class: "kafka_key-exception-fqcn"},
}

const (
	maxTopicLength = 255
	maxErrorLength = 64 << 10
)

// UnknownError is the error message of a dead letter that carries none.
const UnknownError = "unknown error"

// lastHeader returns the value of the last header named key (ASCII case
// ignored). Frameworks append their headers on every failure (Kafka Connect
// always, Spring when told to), and a replay keeps the old ones, so the
// last one belongs to the latest failure, even when it is empty.
func lastHeader(hs []sdk.Header, key string) ([]byte, bool) {
	for i := len(hs) - 1; i >= 0; i-- {
		if bytes.EqualFold(hs[i].Key, []byte(key)) {
			return hs[i].Value, true
		}
	}
	return nil, false
}

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

// errorFromHeaders applies the conventions in order: for the first one whose
// latest message or class header says something, the message if it is not
// empty, else the exception class.
func errorFromHeaders(hs []sdk.Header) string {
	for _, c := range errorConventions {
		if v, ok := lastHeader(hs, c.message); ok {
			if e := sanitize(string(v), maxErrorLength); e != "" {
				return e
			}
		}
		if c.class == "" {
			continue
		}
		if v, ok := lastHeader(hs, c.class); ok {
			if e := sanitize(string(v), maxErrorLength); e != "" {
				return e
			}
		}
	}
	return ""
}

// originFromHeaders finds the original topic the headers name, by the
// conventions in order: the first whose latest header says something. It
// returns that header's name and the topic, or, for a name longer than any
// topic, the header and the name's length (cut to the limit, a long name
// would become another topic: "orders", 250 spaces, then anything).
func originFromHeaders(last func(key string) ([]byte, bool)) (key, topic string, tooLong int) {
	for _, k := range originalTopicHeaders {
		v, ok := last(k)
		if !ok {
			continue
		}
		if t := sanitize(string(v), math.MaxInt); len(t) > maxTopicLength {
			return k, "", len(t)
		} else if t != "" {
			return k, t, 0
		}
	}
	return "", "", 0
}

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
// they came; the original topic comes from the headers, else the source's
// mapping; the error from the headers, else "unknown error"; x-dlq-id names
// the record a returning replay refers to (the store decides whether it
// really is one of ours). A message that was too large to cross whole is
// kept as what arrived, DEAD, with the reason.
//
// A message has no original topic (OriginalTopic "", with the reason in
// LastError) when nothing names one, or when what names one names a
// dead-letter topic: its own (isDLQTopic is then not even asked) or any
// other that isDLQTopic knows. Republishing there would only put it back on
// a DLQ, where it would be taken in again.
func Interpret(source string, d sdk.DeadLetter, now time.Time, isDLQTopic func(string) bool) Incoming {
	in := Incoming{
		Position: Position{Source: source, Topic: storedName(d.Position.Topic), Partition: d.Position.Partition, Offset: d.Position.Offset},
		Key:      d.Key,
		Payload:  d.Value,
		Digest:   Digest(d),
	}
	if ts := d.Timestamp; !ts.Before(producedAtMin) && ts.Before(producedAtMax) {
		ts = ts.UTC()
		in.ProducedAt = &ts
	}
	for _, h := range d.Headers {
		in.Headers = append(in.Headers, Header{Key: h.Key, Value: h.Value})
	}
	namedBy := ""
	key, named, tooLong := originFromHeaders(func(k string) ([]byte, bool) { return lastHeader(d.Headers, k) })
	switch {
	case tooLong > 0:
		namedBy = "the header " + key
	case key != "":
		in.OriginalTopic, namedBy, in.originHeader = named, "the header "+key, key
	}
	if in.OriginalTopic == "" && tooLong == 0 {
		in.OriginalTopic, namedBy = sanitize(d.OriginalTopic, maxTopicLength), "the source's topic mapping"
	}
	switch {
	case tooLong > 0:
		in.LastError = fmt.Sprintf("%s%s names a topic of %d bytes, longer than any topic (%d)", NoOriginalTopicPrefix, namedBy, tooLong, maxTopicLength)
	case in.OriginalTopic == "":
		in.LastError = NoOriginalTopicPrefix + "no header names it and the source maps none for " + in.Position.Topic
	case in.OriginalTopic == in.Position.Topic:
		in.LastError = NoOriginalTopicPrefix + namedBy + " names the DLQ topic itself"
	case isDLQTopic != nil && isDLQTopic(in.OriginalTopic):
		in.LastError = NoOriginalTopicPrefix + namedBy + " names " + in.OriginalTopic + ", a dead-letter topic"
	}
	if in.LastError != "" {
		in.OriginalTopic, in.originHeader = "", ""
	}
	in.ErrorMessage = errorFromHeaders(d.Headers)
	if in.ErrorMessage == "" {
		in.ErrorMessage = UnknownError
	}
	if v, ok := lastHeader(d.Headers, HeaderID); ok {
		if id, err := uuid.Parse(strings.TrimSpace(string(v))); err == nil {
			in.FeedbackOf = &id
			if v, ok := lastHeader(d.Headers, HeaderRetryCount); ok {
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

// Digest identifies what a source read at a position: SHA-256 over the
// key, the headers, the value and the timestamp, each length-prefixed (a
// missing key differs from an empty one). A redelivery of the position has
// the same digest; a message at the same position of a topic deleted and
// created again has another.
func Digest(d sdk.DeadLetter) []byte {
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
	binary.BigEndian.PutUint64(n[:], uint64(len(d.Headers)))
	h.Write(n[:])
	for _, hd := range d.Headers {
		field(hd.Key, true)
		field(hd.Value, true)
	}
	field(d.Value, true)
	binary.BigEndian.PutUint64(n[:], uint64(d.Timestamp.UnixMilli()))
	h.Write(n[:])
	return h.Sum(nil)
}

// RepublishHeaders are the message's headers without earlier x-dlq-* values,
// plus this attempt's x-dlq-id and x-dlq-retry-count.
func RepublishHeaders(m *Message) []sdk.Header {
	out := make([]sdk.Header, 0, len(m.Headers)+2)
	for _, h := range m.Headers {
		if bytes.EqualFold(h.Key, []byte(HeaderID)) || bytes.EqualFold(h.Key, []byte(HeaderRetryCount)) {
			continue
		}
		out = append(out, sdk.Header{Key: h.Key, Value: h.Value})
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
		Truncated: m.Truncated, Dead: m.Dead, LastError: reason,
	}
}
