package dlqtest

import (
	"fmt"
	"sync"

	"github.com/lifecycled/lifecycled/sdk"
	"github.com/lifecycled/lifecycled/sdk/kafkaconv"
)

// Sequence returns successive draws from vals, safe for the intake's
// concurrent store workers.
func Sequence(vals ...float64) func() float64 {
	var mu sync.Mutex
	i := 0
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		v := vals[i%len(vals)]
		i++
		return v
	}
}

// DeadLetters are n dead letters of orders.dlq.v1 from offset from, over
// three partitions, as a source hands them out.
func DeadLetters(from, n int) []sdk.DeadLetter {
	out := make([]sdk.DeadLetter, n)
	for i := range out {
		off := int64(from + i)
		hs := []sdk.Header{{Key: []byte("kafka_dlt-exception-message"), Value: []byte("NPE")}}
		out[i] = sdk.DeadLetter{
			Position: sdk.LogPosition("orders.dlq.v1", int32(off%3), off),
			Headers:  hs,
			Value:    []byte(fmt.Sprintf(`{"n":%d}`, off)),
			Origin:   kafkaconv.Origin(hs, "orders.events.v1"),
		}
	}
	return out
}

// Kafka is d as a Kafka source delivers it: its origin read from its
// headers by the framework conventions, else mapped (the source's topic
// mapping), as the kafka plugin does.
func Kafka(d sdk.DeadLetter, mapped string) sdk.DeadLetter {
	d.Origin = kafkaconv.Origin(d.Headers, mapped)
	return d
}
