package cli

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/wire"
)

// A word that is no command of a group (dlq, tenant, ...) is an error with
// cobra's suggestions, never the group's help with exit 0 (a script took
// `dlq lst` for success); the group alone still prints its help.
func TestAnUnknownSubcommandExitsNonZeroWithASuggestion(t *testing.T) {
	for _, c := range []struct {
		args    []string
		message string
	}{
		{[]string{"dlq", "lst"}, `unknown command "lst" for "lifecycled dlq"; did you mean get or list?`},
		{[]string{"tenant", "cnt", "t1"}, `unknown command "cnt" for "lifecycled tenant"; did you mean count?`},
		{[]string{"stauts"}, `unknown command "stauts" for "lifecycled"; did you mean status?`},
		{[]string{"config", "valdiate"}, `did you mean validate?`},
	} {
		var stdout, stderr bytes.Buffer
		err := Execute(c.args, &stdout, &stderr)
		require.Error(t, err, "%v", c.args)
		require.Equal(t, ExitLocal, ExitCode(err), "%v", c.args)
		require.Contains(t, stderr.String(), c.message, "%v", c.args)
	}
	var stdout, stderr bytes.Buffer
	require.NoError(t, Execute([]string{"dlq"}, &stdout, &stderr))
	require.Contains(t, stdout.String(), "Available Commands:")
}

// A --since or --until that is neither a duration nor an RFC 3339 time is
// refused before any call, naming both forms.
func TestABadSinceNamesBothForms(t *testing.T) {
	for _, args := range [][]string{
		{"dlq", "search", "--since", "2hours"},
		{"dlq", "search", "--until", "yesterday"},
		{"dlq", "bulk", "retry", "--since", "-2h"},
	} {
		var stdout, stderr bytes.Buffer
		err := Execute(append([]string{"--addr", "unix:///nonexistent/lifecycled.sock"}, args...), &stdout, &stderr)
		require.Error(t, err, "%v", args)
		require.Equal(t, ExitLocal, ExitCode(err))
		require.Contains(t, stderr.String(), "give a duration ago (2h, 30m, 90s) or an RFC 3339 time (2026-11-26T10:00:00Z)", "%v", args)
		require.NotContains(t, stderr.String(), "nonexistent", "refused before any call")
	}
}

// An event's detail prints its numbers exactly, as the daemon wrote them.
func TestEventDetailsKeepTheirNumbersExact(t *testing.T) {
	got := eventSummary(wire.Event{Detail: json.RawMessage(`{"offset": 9007199254740993, "partition": 2, "big": 1000000000000000000000, "position": "p2@9007199254740993"}`)})
	require.Equal(t, "big=1000000000000000000000 offset=9007199254740993 partition=2 position=p2@9007199254740993", got)
}
