package console

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

func kafkaSource(addr string) string {
	return fmt.Sprintf(`
[[dlq_source]]
name = "kafka"
plugin = "kafka"
[dlq_source.config]
brokers = [%q]
group_id = "lifecycled-console"
refresh_interval = "1s"
session_timeout = "2s"

[retry]
enabled = false
`, addr)
}

// storm is a small dead-letter storm as Spring and Kafka Connect write
// one: six orders that broke on a duplicate key and three payments that
// were not JSON, produced by kcat like any outside producer.
func storm(t *testing.T, k *testsvc.KafkaBroker) {
	t.Helper()
	var orders strings.Builder
	for i := 0; i < 6; i++ {
		fmt.Fprintf(&orders, "order-%d\t{\"order_id\":\"ORD-%d\",\"customer\":\"Zoë\",\"amount\":%d}\n", i, i, 10*i+5)
	}
	k.Kcat(t, orders.String(), "-P", "-t", "orders.dlq.v1", "-K", "\t",
		"-H", "kafka_dlt-original-topic=orders.events.v1",
		"-H", "kafka_dlt-exception-fqcn=org.springframework.dao.DataIntegrityViolationException",
		"-H", `kafka_dlt-exception-message=ERROR: duplicate key value violates unique constraint "orders_pkey" (SQLSTATE 23505)`,
		"-H", "tenant=acme")
	for i := 0; i < 3; i++ {
		k.Kcat(t, fmt.Sprintf("payment %d: not json\n", i), "-P", "-t", "payments.dlq.v1",
			"-H", "__connect.errors.topic=payments.events.v1",
			"-H", "__connect.errors.exception.class.name=org.apache.kafka.connect.errors.DataException",
			"-H", fmt.Sprintf("__connect.errors.exception.message=Converting byte[] failed at offset %d", 1000+i))
	}
}

// stormDaemon is a daemon on SQLite with the Kafka source, the storm
// stored.
func stormDaemon(t *testing.T, admin string) (*testsvc.KafkaBroker, *testsvc.Daemon) {
	t.Helper()
	k := testsvc.Kafka(t, 1)
	k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1", "orders.fixed.v1", "payments.dlq.v1", "payments.events.v1")
	storm(t, k)
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Extra: kafkaSource(k.Addr), Admin: admin})
	waitStored(t, d, 9)
	return k, d
}

// waitStored waits until the daemon holds n dead letters.
func waitStored(t *testing.T, d *testsvc.Daemon, n int64) {
	t.Helper()
	testsvc.Eventually(t, time.Minute, func() bool {
		var body struct {
			Total int64 `json:"total"`
		}
		var a apitest.Answer
		apitest.Record(d, &a).Search(t.Context(), url.Values{"limit": {"1"}})
		return a.Code == 200 && jsonInto(a.Body, &body) && body.Total == n
	}, "%d dead letters stored", n)
}

// search is the API's answer to a search (what the console must show).
func search(t *testing.T, d *testsvc.Daemon, q url.Values) searchBody {
	t.Helper()
	var b searchBody
	apitest.Expect(t, d, 200, &b).Search(t.Context(), q)
	return b
}

type searchBody struct {
	Messages []struct {
		ID           string `json:"id"`
		ErrorMessage string `json:"error_message"`
		Group        string `json:"group"`
		Status       string `json:"status"`
	} `json:"messages"`
	Total int64 `json:"total"`
}

func requireStatus(t *testing.T, want int, got int, what string) {
	t.Helper()
	require.Equal(t, want, got, what)
}
