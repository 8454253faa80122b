package dlq

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/kafkaconv"
)

func utf8Valid(s string) bool   { return utf8.ValidString(s) }
func containsNUL(s string) bool { return strings.ContainsRune(s, 0) }

// t0 is a fixed time for the tests of package dlq.
var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// interpretKafka is Interpret of what a Kafka source delivers: the origin
// read from the headers by the framework conventions, else mapped (the
// source's topic mapping), as the kafka plugin and a protocol 2 source do.
func interpretKafka(d sdk.DeadLetter, mapped string, now time.Time, isDLQTopic func(string) bool) Incoming {
	d.Origin = kafkaconv.Origin(d.Headers, mapped)
	return Interpret("kafka", sdk.Protocol2Traits, d, now, isDLQTopic)
}

// interpretKafkaNoMap is interpretKafka of a source that maps no topic.
func interpretKafkaNoMap(d sdk.DeadLetter, now time.Time, isDLQTopic func(string) bool) Incoming {
	return interpretKafka(d, "", now, isDLQTopic)
}
