package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/daemon/wire"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// Issue 27 case 5: the automatic loop, a bulk retry and 800 parallel single
// retries on the same PENDING messages, with a short lease. One healthy
// daemon on SQLite sent some messages twice (a lease written after the
// claim had waited longer than the lease was already over). Every message
// is sent exactly once, counted at the broker, and its history records
// that one send.
func TestEveryAttemptIsSentOnceUnderContention(t *testing.T) {
	t.Parallel()
	for _, state := range []string{"sqlite", "postgres"} {
		t.Run(state, func(t *testing.T) {
			const n = 3000
			k := testsvc.Kafka(t, 1)
			k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1")
			produce(t, k, "orders.dlq.v1", n)
			d := startDLQDaemon(t, state, kafkaSource(k.Addr)+`
[retry]
enabled = true
max_retries = 3
initial_delay = "500ms"
max_delay = "2s"
poll_interval = "100ms"
lease = "1s"
`)
			waitTotal(t, d, "orders.dlq.v1", n, 2*time.Minute)
			msgs := allMessages(t, d, "orders.dlq.v1")

			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				apitest.Client(d).StartOperation(t.Context(), wire.OperationRequest{Action: "retry", Filter: json.RawMessage(`{"topic": "orders.dlq.v1"}`), Rate: new(100000.0)})
			}()
			rng := rand.New(rand.NewPCG(uint64(len(state)), 5))
			for range 800 {
				id := msgs[rng.IntN(len(msgs))].ID
				wg.Add(1)
				go func() {
					defer wg.Done()
					apitest.Client(d).RetryMessage(t.Context(), id) // 200, or 409 once taken or resolved
				}()
			}
			wg.Wait()
			testsvc.Eventually(t, 2*time.Minute, func() bool {
				return list(t, d, "orders.dlq.v1", "&status=RESOLVED&page_size=1").Pagination.TotalCount == n
			}, "every message resolved")
			time.Sleep(2 * time.Second) // longer than a lease: a second send would show up now

			sends := map[string]int{}
			recs := consumeRecords(t, k, "orders.events.v1", int(k.Records(t, "orders.events.v1")))
			for _, r := range recs {
				sends[fuzzHeader(r.Headers, "x-dlq-id")+" attempt "+fuzzHeader(r.Headers, "x-dlq-retry-count")]++
			}
			var twice []string
			for key, c := range sends {
				if c > 1 {
					twice = append(twice, fmt.Sprintf("%s: %d sends", key, c))
				}
			}
			require.Empty(t, twice, "each attempt is sent once")
			require.Len(t, recs, n, "one send per message")
			for _, m := range allMessages(t, d, "orders.dlq.v1") {
				resolved := 0
				for _, a := range m.Attempts {
					if a.Outcome == "resolved" {
						resolved++
					}
				}
				require.Equal(t, 1, resolved, "%s: the history records its one send", m.ID)
			}
		})
	}
}
