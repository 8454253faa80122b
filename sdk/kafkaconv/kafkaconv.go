// Package kafkaconv reads a Kafka dead letter's origin from the headers the
// frameworks that dead-letter records write: Spring Kafka's
// DeadLetterPublishingRecoverer and non-blocking retries (@RetryableTopic),
// Kafka Connect's DLQ reporter, and the plain convention of lifecycled's
// design. The kafka plugin uses it; so does the daemon for a source built
// for protocol 2, which left the headers to the daemon.
package kafkaconv

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/lifecycled/lifecycled/sdk"
)

// MaxTopicLength is the longest name a topic may have here (Kafka's own
// limit is 249): a header naming a longer one names no topic, since cut to
// the limit it would become another ("orders", 250 spaces, then anything).
const MaxTopicLength = 255

// OriginalTopicHeaders name the original topic, in order of preference:
// Spring's DeadLetterPublishingRecoverer (KafkaHeaders.DLT_ORIGINAL_TOPIC),
// Spring's non-blocking retries (KafkaHeaders.ORIGINAL_TOPIC), Kafka
// Connect's DLQ reporter (ERROR_HEADER_ORIG_TOPIC), and the plain
// convention.
var OriginalTopicHeaders = []string{"kafka_dlt-original-topic", "kafka_original-topic", "__connect.errors.topic", "original_topic"}

// ErrorConvention is a pair of headers one framework writes for a failure:
// the exception's message and its class.
type ErrorConvention struct{ Message, Class string }

// ErrorConventions carry the consumer's error, in order of preference.
// Value deserialisation or processing failures come before key
// deserialisation failures.
var ErrorConventions = []ErrorConvention{
	{Message: "error"},
	{Message: "kafka_dlt-exception-message", Class: "kafka_dlt-exception-fqcn"},                     // Spring, dead-letter topic
	{Message: "kafka_exception-message", Class: "kafka_exception-fqcn"},                             // Spring, @RetryableTopic
	{Message: "__connect.errors.exception.message", Class: "__connect.errors.exception.class.name"}, // Kafka Connect
	{Message: "kafka_dlt-key-exception-message", Class: "kafka_dlt-key-exception-fqcn"},             // Spring, key deserialisation
	{Message: "kafka_key-exception-message", Class: "kafka_key-exception-fqcn"},
}

// AttemptsHeader is where Spring's non-blocking retries count the attempts
// (RetryTopicHeaders.DEFAULT_HEADER_ATTEMPTS): a 4-byte big-endian int, or
// its decimal text in versions that write it so.
const AttemptsHeader = "retry_topic-attempts"

// maxErrorLength bounds an error message taken from a header.
const maxErrorLength = 64 << 10

// Last returns the value of the last header named key (ASCII case ignored).
// Frameworks append their headers on every failure (Kafka Connect always,
// Spring when told to), and a replay keeps the old ones, so the last one
// belongs to the latest failure, even when it is empty.
func Last(hs []sdk.Header, key string) ([]byte, bool) {
	for i := len(hs) - 1; i >= 0; i-- {
		if bytes.EqualFold(hs[i].Key, []byte(key)) {
			return hs[i].Value, true
		}
	}
	return nil, false
}

// Text is header bytes as text an operator can read: valid UTF-8, no NUL,
// without the spaces around it.
func Text(b []byte) string {
	return strings.TrimSpace(strings.ReplaceAll(strings.ToValidUTF8(string(b), "\uFFFD"), "\x00", ""))
}

// Origin reads the headers by the conventions, in order: the original
// topic from the first header that names one, else mapped (the source's
// own mapping of the dead-letter topic, "" for none); the error message
// from the first convention whose latest message or class header says
// something, the class from the first class header that does; the attempts
// from AttemptsHeader.
func Origin(hs []sdk.Header, mapped string) sdk.Origin {
	var o sdk.Origin
	for _, k := range OriginalTopicHeaders {
		v, ok := Last(hs, k)
		if !ok {
			continue
		}
		if t := Text(v); len(t) > MaxTopicLength {
			o.DestinationFrom = "the header " + k
			o.DestinationProblem = fmt.Sprintf("%s names a topic of %d bytes, longer than any topic (%d)", o.DestinationFrom, len(t), MaxTopicLength)
			break
		} else if t != "" {
			o.Destination, o.DestinationFrom = t, "the header "+k
			break
		}
	}
	if o.Destination == "" && o.DestinationProblem == "" {
		if t := Text([]byte(mapped)); t != "" {
			o.Destination, o.DestinationFrom, o.DestinationConfigured = t, "the source's topic mapping", true
		}
	}
	o.ErrorMessage = errorMessage(hs)
	o.ErrorClass = exceptionClass(hs)
	if v, ok := Last(hs, AttemptsHeader); ok {
		o.Attempts = attempts(v)
	}
	return o
}

// errorMessage applies the conventions in order: for the first one whose
// latest message or class header says something, the message if it is not
// empty, else the exception class.
func errorMessage(hs []sdk.Header) string {
	for _, c := range ErrorConventions {
		if v, ok := Last(hs, c.Message); ok {
			if e := cut(Text(v), maxErrorLength); e != "" {
				return e
			}
		}
		if c.Class == "" {
			continue
		}
		if v, ok := Last(hs, c.Class); ok {
			if e := cut(Text(v), maxErrorLength); e != "" {
				return e
			}
		}
	}
	return ""
}

// exceptionClass is the first class header, in the conventions' order,
// whose latest value says something: a message with a plain "error" header
// may still carry Spring's class.
func exceptionClass(hs []sdk.Header) string {
	for _, c := range ErrorConventions {
		if c.Class == "" {
			continue
		}
		if v, ok := Last(hs, c.Class); ok {
			if e := cut(Text(v), MaxTopicLength); e != "" {
				return e
			}
		}
	}
	return ""
}

// attempts reads Spring's attempts header: 4 bytes big-endian (whose
// first byte is 0 for any count below 16M, which no decimal text has),
// else decimal text; 0 when it is neither or not positive.
func attempts(v []byte) int {
	if len(v) == 4 && v[0] == 0 {
		if n := int32(binary.BigEndian.Uint32(v)); n > 0 {
			return int(n)
		}
		return 0
	}
	if n, err := strconv.Atoi(strings.TrimSpace(string(v))); err == nil && n > 0 {
		return n
	}
	return 0
}

// cut shortens s to at most n bytes, at a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
