package console

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/wire"
)

// The overview's intake rate adds up every topic's hours; the last hour is
// the current one.
func TestIntakeRateAddsUpTheTopics(t *testing.T) {
	r := intakeOf([]wire.Topic{
		{Topic: "a", ArrivalsPerHour: []int64{1, 0, 2}},
		{Topic: "gone", ArrivalsPerHour: []int64{}},
		{Topic: "b", ArrivalsPerHour: []int64{0, 5, 7}},
	})
	require.Equal(t, intakeRate{PerHour: []int64{1, 5, 9}, LastHour: 9, Day: 15}, r)
	require.Equal(t, intakeRate{}, intakeOf(nil))
}
