package dlq_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

// Who counts a page, over the whole space: every state of the operation,
// the page's daemon holding it or not, the page sent to the broker or not.
func TestWhoCountsAPageOverTheWholeSpace(t *testing.T) {
	require.Len(t, dlq.OperationStates, 4, "a new state is placed in this table")
	for _, state := range dlq.OperationStates {
		for _, holds := range []bool{true, false} {
			for _, sent := range []bool{true, false} {
				p := dlq.OperationProgress{Owner: "a", Sent: sent}
				owner := "b"
				if holds {
					owner = "a"
				}
				var want dlq.ProgressCount
				switch {
				case state == dlq.OperationRunning && holds:
					want = dlq.CountRanges // its own page of a run it holds
				case state == dlq.OperationRunning:
					want = dlq.CountRefused // the new owner counts it
				case sent:
					want = dlq.CountItems // ended while the broker had it: nobody else will count it
				default:
					want = dlq.CountRefused // ended, and the page changed nothing outside the store
				}
				require.Equal(t, want, p.CountOf(state, owner), fmt.Sprintf("%s holds=%v sent=%v", state, holds, sent))
			}
		}
	}
}
