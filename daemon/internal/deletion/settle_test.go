package deletion

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// settledCounts keeps counting while a late commit still moves the count,
// and returns the count once three in a row agree.
func TestSettledCountsWaitsOutALateCommit(t *testing.T) {
	seq := []int64{500, 300, 300, 300, 300}
	calls := 0
	got := settledCounts(context.Background(), func() CountReport {
		n := seq[min(calls, len(seq)-1)]
		calls++
		return CountReport{Counts: map[string]int64{"pg": n}}
	})
	require.EqualValues(t, 300, got.Counts["pg"], "the count after the late commit")
	require.Equal(t, 4, calls, "500, then 300 three times")

	// A store that never settles is counted until ctx ends.
	ctx, cancel := context.WithTimeout(context.Background(), 4*settlePause)
	defer cancel()
	n := int64(0)
	got = settledCounts(ctx, func() CountReport { n++; return CountReport{Counts: map[string]int64{"pg": n}} })
	require.Greater(t, got.Counts["pg"], int64(1))
	require.Less(t, got.Counts["pg"], int64(10))
}
