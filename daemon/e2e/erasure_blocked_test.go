package e2e

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// TestSchemaChangeBlocksTheJobUntilRetried, through the CLI with the real
// PostgreSQL plugin: a table the deleter lists is renamed away before the
// job runs. The plugin refuses for good ("the schema changed"), so the job
// is BLOCKED instead of being retried with backoff for ever, nothing of
// any tenant is deleted, and `tenant delete --wait` does not hang on it.
// The table comes back; `tenant retry --wait` completes the erasure, and
// the other tenant's rows are byte for byte what they were.
func TestSchemaChangeBlocksTheJobUntilRetried(t *testing.T) {
	t.Parallel()
	s := newPGStore(t)
	a, b := uuid.NewString(), uuid.NewString()
	seedA := s.seed(t, a, 120).pg
	s.seed(t, b, 80)
	sumB := s.pgChecksum(t, b)
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Extra: s.pgOnly(`grace_period = "2s"`)})

	ctx := testsvc.Context(t, time.Minute)
	rename := func(from, to string) {
		_, err := s.pg.Exec(ctx, "ALTER TABLE "+from+" RENAME TO "+to)
		require.NoError(t, err)
	}
	rename("workflow_steps", "workflow_steps_moved")
	out, errOut, code := d.CLI("tenant", "delete", a, "--yes", "--wait", "--timeout", "2m")
	require.Equal(t, 3, code, "the wait ends with attention needed\n%s\n%s", out, errOut)
	require.Contains(t, errOut, "BLOCKED")
	require.Contains(t, errOut, "lifecycled tenant retry "+a)

	job := latestJob(t, d, a)
	require.Equal(t, "BLOCKED", job.Status)
	require.False(t, job.Verified)
	require.Contains(t, job.LastError, "postgres:workflows")
	require.Equal(t, "BLOCKED", job.Deleters[0].Status)
	attempts := func() int {
		var j struct {
			Attempts int `json:"attempts"`
		}
		apitest.Expect(t, d, 200, &j).Deletion(t.Context(), a)
		return j.Attempts
	}
	before := attempts()
	time.Sleep(3 * time.Second) // several backoffs of retry_initial_delay = 300ms
	require.Equal(t, before, attempts(), "no attempt is spent on a blocked job")
	rename("workflow_steps_moved", "workflow_steps")
	require.Equal(t, seedA, total(s.pgLeft(t, a)), "the refusal deleted nothing")
	require.Equal(t, sumB, s.pgChecksum(t, b))

	out, errOut, code = d.CLI("tenant", "jobs", "--status", "BLOCKED")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	require.Contains(t, out, a)

	out, errOut, code = d.CLI("tenant", "retry", a, "--wait", "--timeout", "2m")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	done := latestJob(t, d, a)
	require.Equal(t, job.ID, done.ID, "the same job went on")
	require.Equal(t, "COMPLETED", done.Status)
	require.True(t, done.Verified)
	require.Zero(t, total(s.pgLeft(t, a)))
	require.Equal(t, sumB, s.pgChecksum(t, b), "the other tenant keeps every row, unchanged")

	_, errOut, code = d.CLI("tenant", "retry", a)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "SYS_TENANT_CONFLICT")
}
