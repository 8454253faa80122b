package adminapi

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
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

func TestStoreOutageIs503AndInternalErrorsSayNothingOfTheDriver(t *testing.T) {
	ae := classify(fmt.Errorf("list: %w: %w", derrors.ErrStoreUnavailable, errors.New(`failed to connect to user=app database=secretdb: conn refused`)), ScopeDLQ)
	require.Equal(t, 503, ae.status)
	require.Equal(t, "SYS_STATE_STORE_UNAVAILABLE", ae.fullCode(ScopeDLQ))
	require.NotContains(t, ae.message, "secretdb")
	ae = classify(errors.New(`ERROR: relation "dlq.x" does not exist, user=app database=secretdb`), ScopeTenant)
	require.Equal(t, 500, ae.status)
	require.Equal(t, "SYS_TENANT_INTERNAL_ERROR", ae.fullCode(ScopeTenant))
	require.NotContains(t, ae.message, "secretdb")
}
