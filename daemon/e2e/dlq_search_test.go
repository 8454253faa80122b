package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// A dead-letter storm triaged with the CLI alone: dead letters produced by
// kcat as Spring and Kafka Connect write them, grouped by failure, found
// by group, header, key and payload text, on both state stores.
func TestDLQSearchAndGroupsThroughTheCLI(t *testing.T) {
	for _, state := range []string{"sqlite", "postgres"} {
		t.Run(state, func(t *testing.T) {
			k := testsvc.Kafka(t, 1)
			k.CreateTopics(t, 1, "orders.dlq.v1", "orders.events.v1", "payments.dlq.v1", "payments.events.v1")
			d := startDLQDaemon(t, state, kafkaSource(k.Addr)+retryBlock(false, "1m"))

			var orders strings.Builder
			for i := 0; i < 6; i++ {
				fmt.Fprintf(&orders, "order-%d\t{\"order_id\":\"ORD-%d\",\"customer\":\"Zoë\"}\n", i, i)
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
			waitTotal(t, d, "orders.dlq.v1", 6, 30*time.Second)
			waitTotal(t, d, "payments.dlq.v1", 3, 30*time.Second)

			out, errOut, code := d.CLI("dlq", "groups")
			require.Equal(t, 0, code, errOut)
			require.Contains(t, out, "duplicate key value violates unique constraint")
			require.Contains(t, out, "Converting byte[] failed at offset")
			lines := strings.Split(strings.TrimSpace(out), "\n")
			require.Len(t, lines, 3, "a header and two groups:\n%s", out)
			require.Equal(t, "6", strings.Fields(lines[1])[1], "the larger group first, 6 PENDING:\n%s", out)

			out, errOut, code = d.CLI("--format", "json", "dlq", "groups", "--topic", "payments.events.v1")
			require.Equal(t, 0, code, errOut)
			var groups struct {
				Groups []struct {
					ID             string           `json:"id"`
					ExceptionClass string           `json:"exception_class"`
					Counts         map[string]int64 `json:"counts"`
					OriginalTopics []string         `json:"original_topics"`
				} `json:"groups"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &groups), out)
			require.Len(t, groups.Groups, 1)
			g := groups.Groups[0]
			require.Equal(t, "org.apache.kafka.connect.errors.DataException", g.ExceptionClass)
			require.EqualValues(t, 3, g.Counts["PENDING"])
			require.Equal(t, []string{"payments.events.v1"}, g.OriginalTopics)

			// The group's messages, two per page, followed to the end.
			out, errOut, code = d.CLI("--format", "json", "dlq", "search", "--group", g.ID, "--limit", "2", "--all", "--oldest")
			require.Equal(t, 0, code, errOut)
			var ids []string
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				var page struct {
					Messages []struct {
						ID, DLQTopic, Group string
						Payload             json.RawMessage
						PayloadBase64       *string `json:"payload_base64"`
					} `json:"messages"`
					Total int `json:"total"`
				}
				require.NoError(t, json.Unmarshal([]byte(line), &page), line)
				require.Equal(t, 3, page.Total)
				for _, m := range page.Messages {
					ids = append(ids, m.ID)
					require.Equal(t, g.ID, m.Group)
					require.NotNil(t, m.PayloadBase64, "not JSON: kept as bytes")
				}
			}
			require.Len(t, ids, 3)

			// Header, key and payload text (non-ASCII) filters, in the table.
			out, errOut, code = d.CLI("dlq", "search", "--header", "tenant=acme", "--q", "ord-3", "--status", "pending")
			require.Equal(t, 0, code, errOut)
			require.Equal(t, 2, len(strings.Split(strings.TrimSpace(out), "\n")), out)
			require.Contains(t, errOut, "1 shown of 1 matching")
			out, errOut, code = d.CLI("dlq", "search", "--q", "zoë", "--key", "order-5", "--since", "1h")
			require.Equal(t, 0, code, errOut)
			require.Contains(t, errOut, "1 shown of 1 matching", out)

			// A bad filter: exit 2, the server names the field, nothing shown.
			out, errOut, code = d.CLI("dlq", "search", "--group", "not-a-group")
			require.Equal(t, 2, code, out)
			require.Contains(t, errOut, "invalid group")
			require.Empty(t, out)
		})
	}
}
