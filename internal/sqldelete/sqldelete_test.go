package sqldelete

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/sdk"
)

func TestTallyStartsEveryTableAtZero(t *testing.T) {
	var heard []int64
	tally := NewTally([]string{"app.orders", "app.users"}, func(n int64) { heard = append(heard, n) })
	tally.Add("app.orders", 3)
	tally.Report()
	tally.Add("app.orders", 2)
	tally.Report()
	require.Equal(t, map[string]int64{"app.orders": 5, "app.users": 0}, tally.ByTable)
	require.Equal(t, int64(5), tally.Total)
	require.Equal(t, []int64{3, 5}, heard)
	NewTally(nil, nil).Report() // no progress asked for: nothing to tell
}

func TestSchemaChangedMakesAConfigErrorPermanent(t *testing.T) {
	err := SchemaChanged(sdk.InvalidConfig(sdk.FieldError{Field: "tables", Problem: "no table app.x"}))
	var se *sdk.Error
	require.ErrorAs(t, err, &se)
	require.Equal(t, sdk.ClassPermanent, se.Class)
	require.Contains(t, err.Error(), "the schema changed since the deleter was configured: ")
	other := errors.New("connection refused")
	require.Same(t, other, SchemaChanged(other))
}

func TestCheckReadyRefusesBeforeConfigure(t *testing.T) {
	var se *sdk.Error
	const tenant = "0b3f5a4e-9d2c-4e1a-8f67-2c5d9e0a1b34"
	require.ErrorAs(t, CheckReady(false, sdk.UUIDFormat, tenant), &se)
	require.Equal(t, sdk.CodeUnavailable, se.Code)
	require.NoError(t, CheckReady(true, sdk.UUIDFormat, tenant))
	require.Error(t, CheckReady(true, sdk.UUIDFormat, "acme"))
}

func TestGlobalRowsDefaultToKept(t *testing.T) {
	off := false
	require.True(t, Config{}.KeepsGlobalRows())
	require.False(t, Config{GlobalRows: &off}.KeepsGlobalRows())
}
