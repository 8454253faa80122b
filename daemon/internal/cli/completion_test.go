package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/deletion"
	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/enum"
)

// complete asks the CLI what the shell should offer after args.
func complete(t *testing.T, args ...string) []string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	require.NoError(t, Execute(append([]string{"__complete"}, args...), &stdout, &stderr), stderr.String())
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		if line != "" && !strings.HasPrefix(line, ":") {
			out = append(out, strings.SplitN(line, "\t", 2)[0])
		}
	}
	return out
}

// Completion offers the values the daemon declares, no more and no fewer.
func TestCompletionOffersTheDeclaredValues(t *testing.T) {
	require.Equal(t, enum.Strings(dlq.OperationActions), complete(t, "dlq", "bulk", ""))
	require.Equal(t, enum.Strings(dlq.Statuses), complete(t, "dlq", "bulk", "retry", "--status", ""))
	require.Equal(t, enum.Strings(dlq.Statuses), complete(t, "dlq", "search", "--status", ""))
	require.Equal(t, enum.Strings(deletion.JobStatuses), complete(t, "tenant", "jobs", "--status", ""))
}
