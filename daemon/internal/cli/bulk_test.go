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
