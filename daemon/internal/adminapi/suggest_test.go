package adminapi

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCloseMatches(t *testing.T) {
	topics := []string{"orders.dlq.v1", "billing.dlq.v1", "payments.dlq.v1", "orders.dlq.v2"}
	for name, tc := range map[string]struct {
		in   string
		want []string
	}{
		"one letter missing":  {"order.dlq.v1", []string{"orders.dlq.v1", "orders.dlq.v2"}},
		"case":                {"Orders.DLQ.v1", []string{"orders.dlq.v1", "orders.dlq.v2"}},
		"nothing close":       {"nosuch.dlq.v1", nil},
		"exact is distance 0": {"billing.dlq.v1", []string{"billing.dlq.v1"}},
	} {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.want, closeMatches(tc.in, topics))
		})
	}
	require.Equal(t, 3, editDistance("kitten", "sitting"))
	require.Equal(t, 0, editDistance("", ""))
}
