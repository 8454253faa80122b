package sdk

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFingerprintsOfIgnoresOrderAndRepeats(t *testing.T) {
	var f Fingerprints
	a := f.Of([]string{"table a", "table b", "order [a b]"})
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, a)
	require.Equal(t, a, f.Of([]string{"order [a b]", "table b", "table a", "table b"}))
	require.NotEqual(t, a, f.Of([]string{"table a", "table b", "order [b a]"}))
	require.NotEqual(t, f.Of([]string{"x\ny"}), f.Of([]string{"x", "y"}), "a line break inside a line is not two lines")
}

func TestFingerprintsCheck(t *testing.T) {
	var f Fingerprints
	was := f.Of([]string{"store db1", "table a", "table b"})
	require.NoError(t, f.Check("", []string{"anything"}), "no fingerprint sent: no check")
	require.NoError(t, f.Check(was, []string{"table b", "table a", "store db1"}))

	err := f.Check(was, []string{"store db2", "table a", "table b", "table c"})
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.Equal(t, ClassPermanent, ClassOf(err))
	require.Contains(t, err.Error(), "checked fingerprint "+was)
	require.Contains(t, err.Error(), "nothing was deleted: gone: store db1; new: store db2; new: table c")

	err = f.Check("sha256:unknown", []string{"table a"})
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.Contains(t, err.Error(), "did not compute the checked plan")
}

func TestFingerprintsCheckBoundsWhatItLists(t *testing.T) {
	var f Fingerprints
	was := f.Of([]string{"x"})
	var now []string
	for i := range 30 {
		now = append(now, fmt.Sprintf("table %02d", i))
	}
	err := f.Check(was, now)
	require.Contains(t, err.Error(), "and 19 more")
	require.NotContains(t, err.Error(), "table 29")
}

func TestFingerprintsForgetsTheOldest(t *testing.T) {
	var f Fingerprints
	first := f.Of([]string{"v 0"})
	for i := 1; i <= fingerprintsKept; i++ {
		f.Of([]string{fmt.Sprintf("v %d", i)})
	}
	require.Contains(t, f.Check(first, []string{"v x"}).Error(), "did not compute the checked plan")
	require.Len(t, f.recent, fingerprintsKept)
}

// deleteRecorder records the DeleteRequest it got.
