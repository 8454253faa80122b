package console

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The chart scales to the busiest hour, draws nothing for an empty hour,
// says the total and each hour's count, and holds numbers only.
func TestSparklineScalesToTheBusiestHour(t *testing.T) {
	hours := make([]int64, 24)
	hours[0], hours[22], hours[23] = 1, 40, 80
	svg := string(sparkline(hours))
	require.Contains(t, svg, `aria-label="121 in the last 24 hours, per hour"`)
	require.Contains(t, svg, `y="0.0" width="3.0" height="20.0"><title>80</title>`, "the busiest hour fills the height")
	require.Contains(t, svg, `height="10.0"><title>40</title>`)
	require.Contains(t, svg, `height="1.0"><title>1</title>`, "a quiet hour still shows")
	require.Equal(t, 21, strings.Count(svg, `height="0.0"`), "nothing drawn for the 21 empty hours")
	require.Empty(t, sparkline(nil))
}
