package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestReadTenantListKeepsLineNumbers(t *testing.T) {
	list, err := readTenantList(strings.NewReader("# leaving in November\n\n  a  \nb\r\n\t# indented comment\nc"))
	require.NoError(t, err)
	require.Equal(t, []listedTenant{{line: 3, id: "a"}, {line: 4, id: "b"}, {line: 6, id: "c"}}, list)
}

func TestChunksBoundCountAndBytes(t *testing.T) {
	many := make([]listedTenant, 2*bulkChunk+5)
	for i := range many {
		many[i] = listedTenant{line: i + 1, id: "44444444-dddd-4ddd-8ddd-444444444444"}
	}
	parts := chunks(many)
	require.Len(t, parts, 3)
	require.Len(t, parts[0], bulkChunk)
	require.Len(t, parts[2], 5)
	require.Equal(t, bulkChunk+1, parts[1][0].line, "nothing lost or repeated between parts")

	long := make([]listedTenant, 10)
	for i := range long {
		long[i] = listedTenant{line: i + 1, id: strings.Repeat("x", 200<<10)}
	}
	for _, p := range chunks(long) {
		size := 0
		for _, t := range p {
			size += len(t.id) + 4
		}
		require.LessOrEqual(t, size, bulkChunkBytes, "a request stays under the API's body limit")
	}
}

func TestParseNotBeforeFlag(t *testing.T) {
	got, err := parseNotBeforeFlag("2026-11-01T12:00:00+02:00")
	require.NoError(t, err)
	require.Equal(t, "2026-11-01T10:00:00Z", got)
	got, err = parseNotBeforeFlag("72h")
	require.NoError(t, err)
	at, err := time.Parse(time.RFC3339, got)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(72*time.Hour), at, 2*time.Second)
	for _, bad := range []string{"tomorrow", "-1h", "2026-11-01"} {
		_, err := parseNotBeforeFlag(bad)
		require.Error(t, err, bad)
	}
	got, err = parseNotBeforeFlag("")
	require.NoError(t, err)
	require.Empty(t, got)
}

// TestBulkRefusesFilterTextJSONCannotCarry: JSON carries a bad byte of a
// flag as U+FFFD, so a bulk operation would act on other messages than
// `dlq search` with the same flag finds (outside attack: `dlq bulk delete
// --q $'\xff'` deleted a message holding U+FFFD and no 0xFF). It is
// refused as usage before any request.
func TestBulkRefusesFilterTextJSONCannotCarry(t *testing.T) {
	for _, args := range [][]string{
		{"--q", "\xff"},
		{"--error", "abc\xffdef"},
		{"--key", "k\xfe"},
		{"--header", "tenant=\xff"},
		{"--topic", "orders.dlq.v1", "--group", "\xc3"},
	} {
		var stdout, stderr strings.Builder
		err := Execute(append([]string{"--addr", "unix:///nonexistent/lifecycled.sock", "dlq", "bulk", "delete", "--dry-run"}, args...), &stdout, &stderr)
		require.Error(t, err, "%q", args)
		require.Equal(t, ExitLocal, ExitCode(err), "%q: refused here, not by the daemon", args)
		require.Contains(t, err.Error(), "not valid UTF-8", "%q", args)
	}
	// Valid text goes on to the daemon (absent here).
	var stdout, stderr strings.Builder
	err := Execute([]string{"--addr", "unix:///nonexistent/lifecycled.sock", "dlq", "bulk", "delete", "--dry-run", "--q", "Überweisung \u00ff"}, &stdout, &stderr)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "UTF-8")
}
