package sdk

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestProofFailureNamesEveryCheckThatFoundRows(t *testing.T) {
	checks := []ProofCheck{
		{Kind: ProofIdentities, Target: "public.orders", Checked: 10, Found: 2, Detail: "still there"},
		{Kind: ProofIdentities, Target: "public.lines", Checked: 5, Found: 0},
		{Kind: ProofOrphans, Target: "lines_order_fkey", Found: 1, Detail: "public.lines rows without their order"},
		{Kind: ProofKept, Target: "public.audit", Found: 7},
	}
	require.EqualValues(t, 3, ProofLeft(checks))
	err := ProofFailure(checks)
	require.Equal(t, ClassPermanent, ClassOf(err))
	require.EqualError(t, err, "the erasure's independent proof found rows left: 2 of the 10 rows of public.orders recorded before the delete are still there; "+
		"1 rows reference removed rows through lines_order_fkey: public.lines rows without their order")
}
