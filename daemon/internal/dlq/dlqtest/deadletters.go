package dlqtest

import (
	"fmt"
	"sync"

	"github.com/lifecycled/lifecycled/sdk"
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
		out[i] = sdk.DeadLetter{
			Position:      sdk.Position{Topic: "orders.dlq.v1", Partition: int32(off % 3), Offset: off},
			Headers:       []sdk.Header{{Key: []byte("kafka_dlt-exception-message"), Value: []byte("NPE")}},
			Value:         []byte(fmt.Sprintf(`{"n":%d}`, off)),
			OriginalTopic: "orders.events.v1",
		}
	}
	return out
}
