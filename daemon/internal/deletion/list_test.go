package deletion_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
)

func TestCursorRoundTrip(t *testing.T) {
	c := deletion.Cursor{At: time.Date(2026, 11, 1, 12, 0, 0, 123456000, time.UTC), ID: uuid.MustParse("0195e5a0-0000-7000-8000-000000000001")}
	got, err := deletion.ParseCursor(c.String())
	require.NoError(t, err)
	require.Equal(t, c, *got)
	for _, bad := range []string{"", "x", "MTIz", c.String() + "A", "LTEuMDE5NWU1YTAtMDAwMC03MDAwLTgwMDAtMDAwMDAwMDAwMDAx"[:20]} {
		_, err := deletion.ParseCursor(bad)
		require.ErrorIs(t, err, derrors.ErrInvalid, "%q", bad)
	}
}

// FuzzParseCursor: a cursor comes from the query string; any text is
// refused or parsed, never a panic, and a parsed one prints back the same.
func FuzzParseCursor(f *testing.F) {
	f.Add(deletion.Cursor{At: time.Unix(1700000000, 0), ID: uuid.New()}.String())
	f.Add("")
	f.Add("MTcwMDAwMDAwMDAwMDAwMC4")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := deletion.ParseCursor(s)
		if err != nil {
			return
		}
		again, err := deletion.ParseCursor(c.String())
		if err != nil || *again != *c {
			t.Fatalf("%q parsed to %+v, which does not round-trip: %v", s, c, err)
		}
	})
}
