package console

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
)

// GET /api/v1/dlq gives every listed topic its 24
// hourly arrivals from arrivals_since (docs/reference.md: "24 numbers,
// oldest first, the first hour starting at arrivals_since"), a topic
// without live messages too: one that is paused and whose messages all
// left is listed, with 24 zeros and null first/last seen.
func TestAPausedTopicWithoutLiveMessagesHas24Hours(t *testing.T) {
	t.Parallel()
	_, d := stormDaemon(t, "")
	api := apitest.Client(d)
	_, err := api.Pause(t.Context(), "payments.dlq.v1", "incident")
	require.NoError(t, err)
	for _, m := range search(t, d, map[string][]string{"topic": {"payments.dlq.v1"}}).Messages {
		_, err := api.DeleteMessage(t.Context(), m.ID)
		require.NoError(t, err)
	}
	var a apitest.Answer
	apitest.Record(d, &a).Topics(t.Context())
	require.Equal(t, 200, a.Code)
	var body struct {
		Topics []map[string]json.RawMessage `json:"topics"`
	}
	require.NoError(t, json.Unmarshal(a.Body, &body))
	var seen int
	for _, tp := range body.Topics {
		var name string
		require.NoError(t, json.Unmarshal(tp["topic"], &name))
		var hours []int64
		require.NoError(t, json.Unmarshal(tp["arrivals_per_hour"], &hours))
		var since string
		require.NoError(t, json.Unmarshal(tp["arrivals_since"], &since))
		t.Logf("%s: first_seen %s last_seen %s arrivals_since %q arrivals_per_hour %v", name, tp["first_seen"], tp["last_seen"], since, hours)
		require.Len(t, hours, 24, "%s: 24 hours", name)
		require.NotEmpty(t, since, "%s: arrivals_since", name)
		seen++
	}
	require.Equal(t, 2, seen, "both topics listed (the paused one without messages too)")
}
