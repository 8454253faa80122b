package kafkaconv

import (
	"strings"
	"testing"

	"github.com/lifecycled/lifecycled/sdk"
)

func hs(kv ...string) []sdk.Header {
	var out []sdk.Header
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, sdk.Header{Key: []byte(kv[i]), Value: []byte(kv[i+1])})
	}
	return out
}

func TestOriginByTheConventions(t *testing.T) {
	for name, tc := range map[string]struct {
		headers []sdk.Header
		mapped  string
		want    sdk.Origin
	}{
		"spring's dead-letter topic": {
			headers: hs("kafka_dlt-original-topic", "orders.events.v1", "kafka_dlt-exception-message", "NPE at line 3",
				"kafka_dlt-exception-fqcn", "java.lang.NullPointerException"),
			mapped: "mapped.v1",
			want: sdk.Origin{Destination: "orders.events.v1", DestinationFrom: "the header kafka_dlt-original-topic",
				ErrorMessage: "NPE at line 3", ErrorClass: "java.lang.NullPointerException"},
		},
		"connect": {
			headers: hs("__connect.errors.topic", "sink.v1", "__connect.errors.exception.class.name", "org.apache.kafka.connect.errors.DataException"),
			want: sdk.Origin{Destination: "sink.v1", DestinationFrom: "the header __connect.errors.topic",
				ErrorMessage: "org.apache.kafka.connect.errors.DataException", ErrorClass: "org.apache.kafka.connect.errors.DataException"},
		},
		"the latest header wins, even empty, and the mapping fills in": {
			headers: hs("kafka_dlt-original-topic", "old.v1", "KAFKA_DLT-ORIGINAL-TOPIC", "  "),
			mapped:  "mapped.v1",
			want:    sdk.Origin{Destination: "mapped.v1", DestinationFrom: "the source's topic mapping", DestinationConfigured: true},
		},
		"a plain error header keeps spring's class": {
			headers: hs("error", "boom", "kafka_dlt-exception-fqcn", "x.Y"),
			want:    sdk.Origin{ErrorMessage: "boom", ErrorClass: "x.Y"},
		},
		"@RetryableTopic's attempts, as 4 bytes": {
			headers: []sdk.Header{{Key: []byte(AttemptsHeader), Value: []byte{0, 0, 0, 4}}},
			want:    sdk.Origin{Attempts: 4},
		},
		"attempts as text": {
			headers: hs(AttemptsHeader, "1234"),
			want:    sdk.Origin{Attempts: 1234},
		},
		"attempts that are neither": {
			headers: hs(AttemptsHeader, "many"),
			want:    sdk.Origin{},
		},
		"a name longer than any topic names none, and the mapping does not stand in": {
			headers: hs("kafka_dlt-original-topic", "orders"+strings.Repeat(" ", 250)+"payments.v1"),
			mapped:  "mapped.v1",
			want: sdk.Origin{DestinationFrom: "the header kafka_dlt-original-topic",
				DestinationProblem: "the header kafka_dlt-original-topic names a topic of 267 bytes, longer than any topic (255)"},
		},
		"nothing": {want: sdk.Origin{}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Origin(tc.headers, tc.mapped); got != tc.want {
				t.Errorf("Origin = %+v\nwant     %+v", got, tc.want)
			}
		})
	}
}
