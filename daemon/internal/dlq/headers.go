package dlq

import (
	"strconv"
	"strings"
	"unicode/utf8"

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
// DeadLetterPublishingRecoverer, Kafka Connect's DLQ reporter, and the
// plain convention of the source design.
var originalTopicHeaders = []string{"kafka_dlt-original-topic", "__connect.errors.topic", "original_topic"}

// Headers carrying the consumer's error, in order of preference.
var errorHeaders = []string{"error", "kafka_dlt-exception-message", "__connect.errors.exception.message"}

const (
	maxTopicLength = 255
	maxErrorLength = 64 << 10
)

// UnknownError is the error message of a dead letter that carries none.
const UnknownError = "unknown error"

func header(hs []sdk.Header, key string) (string, bool) {
	for _, h := range hs {
		if strings.EqualFold(h.Key, key) && len(h.Value) > 0 {
			return string(h.Value), true
		}
	}
	return "", false
}

// sanitize makes header text safe to store: valid UTF-8, no NUL (which
// PostgreSQL's text refuses), at most max bytes.
func sanitize(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "")
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return strings.TrimSpace(s)
}

// Interpret turns a dead letter from a source into what the store keeps: the
// original topic from the headers, else the source's mapping, else the DLQ
// topic itself; the error from the headers, else "unknown error"; and the
// record a returning replay refers to (x-dlq-id).
func Interpret(source string, d sdk.DeadLetter) Incoming {
	in := Incoming{
		Position: Position{Source: source, Topic: d.Position.Topic, Partition: d.Position.Partition, Offset: d.Position.Offset},
		Key:      d.Key,
		Payload:  d.Value,
	}
	if in.Payload == nil {
		in.Payload = []byte{}
	}
	if !d.Timestamp.IsZero() && d.Timestamp.Unix() > 0 {
		ts := d.Timestamp.UTC()
		in.ProducedAt = &ts
	}
	for _, h := range d.Headers {
		in.Headers = append(in.Headers, Header{Key: h.Key, Value: h.Value})
	}
	for _, k := range originalTopicHeaders {
		if v, ok := header(d.Headers, k); ok {
			if t := sanitize(v, maxTopicLength); t != "" {
				in.OriginalTopic = t
				break
			}
		}
	}
	if in.OriginalTopic == "" {
		in.OriginalTopic = sanitize(d.OriginalTopic, maxTopicLength)
	}
	if in.OriginalTopic == "" {
		in.OriginalTopic = sanitize(d.Position.Topic, maxTopicLength)
	}
	for _, k := range errorHeaders {
		if v, ok := header(d.Headers, k); ok {
			if e := sanitize(v, maxErrorLength); e != "" {
				in.ErrorMessage = e
				break
			}
		}
	}
	if in.ErrorMessage == "" {
		in.ErrorMessage = UnknownError
	}
	if v, ok := header(d.Headers, HeaderID); ok {
		if id, err := uuid.Parse(strings.TrimSpace(v)); err == nil {
			in.FeedbackOf = &id
		}
	}
	in.Position.Topic = sanitize(in.Position.Topic, maxTopicLength)
	return in
}

// RepublishHeaders are the message's headers without earlier x-dlq-* values,
// plus this attempt's x-dlq-id and x-dlq-retry-count.
func RepublishHeaders(m *Message) []sdk.Header {
	out := make([]sdk.Header, 0, len(m.Headers)+2)
	for _, h := range m.Headers {
		if strings.EqualFold(h.Key, HeaderID) || strings.EqualFold(h.Key, HeaderRetryCount) {
			continue
		}
		out = append(out, sdk.Header{Key: h.Key, Value: h.Value})
	}
	return append(out,
		sdk.Header{Key: HeaderID, Value: []byte(m.ID.String())},
		sdk.Header{Key: HeaderRetryCount, Value: []byte(strconv.Itoa(m.RetryCount + 1))},
	)
}
