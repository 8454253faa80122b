package migrations_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/migrations"
)

// TestDialectsShareTheirNumbering: a change has the same number and name
// on both dialects.
func TestDialectsShareTheirNumbering(t *testing.T) {
	pg, err := migrations.Available(migrations.Postgres)
	require.NoError(t, err)
	lite, err := migrations.Available(migrations.SQLite)
	require.NoError(t, err)
	require.Equal(t, pg, lite)
	for i, name := range pg {
		require.Equal(t, fmt.Sprintf("%03d_", i+1), name[:4], "one number a change, none left out")
	}
}
