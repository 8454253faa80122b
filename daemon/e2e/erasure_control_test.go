package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// stateStores are the daemon.state values the erasure tests run under: an
// embedded SQLite file (empty: the daemon's default) and PostgreSQL.
func stateStores(t *testing.T) map[string]func() string {
	return map[string]func() string{
		"sqlite":   func() string { return "" },
		"postgres": func() string { return testsvc.PGDatabase(t) },
	}
}

// pgOnly is a [deletion] table and the postgres deleter alone.
func (s *stores) pgOnly(deletionExtra string) string {
	return fmt.Sprintf(`
[deletion]
concurrency = 2
retry_initial_delay = "300ms"
retry_max_delay = "2s"
poll_interval = "100ms"
lease = "3s"
%s

[[deleter]]
name = "postgres:workflows"
plugin = "postgres"
[deleter.config]
dsn = %q
tables = ["workflow_steps", "workflow_instances", "workflow_definitions"]
tenant_column = "tenant_id"
batch_size = %d
`, deletionExtra, s.pgDSN, s.pgBatch)
}

// pgLeft counts a tenant's rows per table with PostgreSQL's own client.
func (s *stores) pgLeft(t *testing.T, tenant string) map[string]int64 {
	ctx := testsvc.Context(t, time.Minute)
	out := map[string]int64{}
	for _, table := range []string{"workflow_steps", "workflow_instances", "workflow_definitions"} {
		var n int64
		require.NoError(t, s.pg.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE tenant_id = $1", tenant).Scan(&n))
		out[table] = n
	}
	return out
}

// pgChecksum is a hash of every row of a tenant in every table.
func (s *stores) pgChecksum(t *testing.T, tenant string) string {
	ctx := testsvc.Context(t, time.Minute)
	var parts []string
	for _, table := range []string{"workflow_steps", "workflow_instances", "workflow_definitions"} {
		var sum string
		require.NoError(t, s.pg.QueryRow(ctx, "SELECT coalesce(md5(string_agg(t::text, ',' ORDER BY t.id)), '') FROM "+table+
			" t WHERE tenant_id = $1", tenant).Scan(&sum))
		parts = append(parts, sum)
	}
	h := sha256.Sum256([]byte(strings.Join(parts, "|")))
	return hex.EncodeToString(h[:])
}

func total(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

type fullJob struct {
	ID                string  `json:"id"`
	TenantID          string  `json:"tenant_id"`
	Status            string  `json:"status"`
	OnHold            bool    `json:"on_hold"`
	NotBefore         *string `json:"not_before"`
	StartedAt         *string `json:"started_at"`
	FinishedAt        *string `json:"finished_at"`
	CancelRequestedAt *string `json:"cancel_requested_at"`
	CancelledByUID    *int64  `json:"cancelled_by_uid"`
	LastError         string  `json:"last_error"`
	Verified          bool    `json:"verified"`
	Report            struct {
		Cancelled map[string]struct {
			DeletedCount int64            `json:"deleted_count"`
			Breakdown    map[string]int64 `json:"breakdown"`
		} `json:"cancelled"`
	} `json:"report"`
	Deleters []struct {
		Name         string           `json:"name"`
		Status       string           `json:"status"`
		DeletedCount int64            `json:"deleted_count"`
		Breakdown    map[string]int64 `json:"breakdown"`
	} `json:"deleters"`
}

func latestJob(t *testing.T, d *testsvc.Daemon, tenant string) fullJob {
	t.Helper()
	var j fullJob
	apitest.Expect(t, d, 200, &j).Deletion(t.Context(), tenant)
	return j
}

func parseAPITime(t *testing.T, s *string) time.Time {
	t.Helper()
	require.NotNil(t, s)
	at, err := time.Parse(time.RFC3339Nano, *s)
	require.NoError(t, err)
	return at
}

// TestCancelInTheMiddleOfALargePostgresDeletion: a tenant of 126,000 rows
// deleted 200 rows a statement; `tenant cancel` in the middle stops the
// plugin within one batch, the job ends CANCELLED with a report that
// matches the rows PostgreSQL lost, table by table, and another tenant
// keeps every row.
func TestCancelInTheMiddleOfALargePostgresDeletion(t *testing.T) {
	t.Parallel()
	for name, state := range stateStores(t) {
		t.Run(name, func(t *testing.T) {
			s := newPGStore(t)
			s.pgBatch = 200
			a, b := uuid.NewString(), uuid.NewString()
			seedA := s.seed(t, a, 60000).pg
			s.seed(t, b, 500)
			initial := s.pgLeft(t, a)
			require.Equal(t, seedA, total(initial))
			sumB := s.pgChecksum(t, b)
			d := testsvc.StartDaemon(t, testsvc.DaemonOptions{State: state(), Extra: s.pgOnly("")})
			testsvc.Eventually(t, time.Minute, apitest.Ready(d), "plugins ready")

			startDeletion(t, d, a)
			testsvc.Eventually(t, time.Minute, func() bool { return total(s.pgLeft(t, a)) < seedA-20*int64(s.pgBatch) }, "deletion under way")
			out, errOut, code := d.CLI("tenant", "cancel", a, "--no-wait")
			require.Equal(t, 0, code, "%s\n%s", out, errOut)
			atCancel := total(s.pgLeft(t, a))

			job := waitJobStatus(t, d, a, "CANCELLED", time.Minute)
			left := s.pgLeft(t, a)
			t.Logf("cancelled with %d of %d rows left; %d deleted after the cancel returned", total(left), seedA, atCancel-total(left))
			require.Positive(t, total(left), "stopped in the middle")
			require.LessOrEqual(t, atCancel-total(left), int64(s.pgBatch), "the plugin stops within one batch")

			require.Len(t, job.Deleters, 1)
			require.Equal(t, "CANCELLED", job.Deleters[0].Status)
			require.Equal(t, seedA-total(left), job.Deleters[0].DeletedCount, "the report is exact")
			for table, n := range initial {
				require.Equal(t, n-left[table], job.Deleters[0].Breakdown["public."+table], "exact for %s (breakdown %v)", table, job.Deleters[0].Breakdown)
			}
			require.Equal(t, job.Deleters[0].DeletedCount, job.Report.Cancelled["postgres:workflows"].DeletedCount)
			require.NotNil(t, job.CancelRequestedAt)
			require.NotNil(t, job.CancelledByUID, "the caller's uid is recorded")
			require.NotNil(t, job.FinishedAt)
			require.Contains(t, d.Logs(), "deletion job cancel", "audited")
			require.Equal(t, sumB, s.pgChecksum(t, b), "the other tenant keeps every row")

			time.Sleep(2 * time.Second)
			require.Equal(t, left, s.pgLeft(t, a), "a cancelled job is never picked up again")
			require.Equal(t, "CANCELLED", latestJob(t, d, a).Status)
			out, errOut, code = d.CLI("tenant", "cancel", a)
			require.Equal(t, 2, code, "cancelling a finished job: %s", out)
			require.Contains(t, errOut, "SYS_TENANT_CONFLICT")
		})
	}
}

func waitJobStatus(t *testing.T, d *testsvc.Daemon, tenant, status string, within time.Duration) fullJob {
	t.Helper()
	var j fullJob
	testsvc.Eventually(t, within, func() bool {
		var a apitest.Answer
		apitest.Record(d, &a).Deletion(t.Context(), tenant)
		if a.Code != 200 {
			return false
		}
		require.NoError(t, json.Unmarshal(a.Body, &j))
		return j.Status == status
	}, "job of %s reaches %s (is %s)", tenant, status, j.Status)
	return j
}

// TestScheduledDeletionSurvivesARestartAndStartsOnTime: with a grace
// period the job waits SCHEDULED; the daemon is killed and started again
// before its time, and the job starts at its time, not before.
func TestScheduledDeletionSurvivesARestartAndStartsOnTime(t *testing.T) {
	for name, state := range stateStores(t) {
		t.Run(name, func(t *testing.T) {
			s := newPGStore(t)
			a := uuid.NewString()
			seedA := s.seed(t, a, 300).pg
			d := testsvc.StartDaemon(t, testsvc.DaemonOptions{State: state(), Extra: s.pgOnly(`grace_period = "6s"`)})
			out, errOut, code := d.CLI("tenant", "delete", a, "--yes")
			require.Equal(t, 0, code, "%s\n%s", out, errOut)
			require.Contains(t, out, "SCHEDULED until")
			job := latestJob(t, d, a)
			require.Equal(t, "SCHEDULED", job.Status)
			notBefore := parseAPITime(t, job.NotBefore)
			require.Nil(t, job.StartedAt)

			d.Kill9()
			time.Sleep(time.Second)
			d.Restarted(t)
			require.Equal(t, "SCHEDULED", latestJob(t, d, a).Status, "the schedule survived the restart")
			require.Equal(t, seedA, total(s.pgLeft(t, a)), "nothing ran before its time")
			out, _, code = d.CLI("tenant", "jobs", "--status", "SCHEDULED")
			require.Equal(t, 0, code)
			require.Contains(t, out, a)

			done := waitJobStatus(t, d, a, "COMPLETED", time.Minute)
			started := parseAPITime(t, done.StartedAt)
			require.False(t, started.Before(notBefore), "started %s, not before %s", started, notBefore)
			require.Less(t, started.Sub(notBefore), 2*time.Second, "on time: started %s for %s", started, notBefore)
			require.True(t, done.Verified)
			require.Zero(t, total(s.pgLeft(t, a)))
		})
	}
}

// TestHoldBlocksAScheduledJobAndReleaseLetsItRun, through the CLI.
func TestHoldBlocksAScheduledJobAndReleaseLetsItRun(t *testing.T) {
	t.Parallel()
	for name, state := range stateStores(t) {
		t.Run(name, func(t *testing.T) {
			s := newPGStore(t)
			a := uuid.NewString()
			seedA := s.seed(t, a, 200).pg
			d := testsvc.StartDaemon(t, testsvc.DaemonOptions{State: state(), Extra: s.pgOnly(`grace_period = "5s"`)})
			_, errOut, code := d.CLI("tenant", "delete", a, "--yes")
			require.Equal(t, 0, code, errOut)
			notBefore := parseAPITime(t, latestJob(t, d, a).NotBefore)
			out, errOut, code := d.CLI("tenant", "hold", a, "--reason", "litigation 2026-17")
			require.Equal(t, 0, code, "%s\n%s", out, errOut)
			require.Contains(t, out, "on hold")
			require.True(t, time.Now().Before(notBefore), "held while the job is still SCHEDULED")

			time.Sleep(time.Until(notBefore) + 2*time.Second) // well past not_before
			job := latestJob(t, d, a)
			require.Equal(t, "SCHEDULED", job.Status)
			require.True(t, job.OnHold)
			require.Equal(t, seedA, total(s.pgLeft(t, a)), "a held tenant keeps every row")
			out, _, code = d.CLI("tenant", "delete", a, "--yes")
			require.Equal(t, 2, code, out)
			_, errOut, _ = d.CLI("tenant", "delete", a, "--yes")
			require.Contains(t, errOut, "SYS_TENANT_ON_HOLD")
			out, _, code = d.CLI("tenant", "holds")
			require.Equal(t, 0, code)
			require.Contains(t, out, "litigation 2026-17")
			out, _, _ = d.CLI("tenant", "status", a)
			require.Contains(t, out, "on hold")

			out, errOut, code = d.CLI("tenant", "release", a)
			require.Equal(t, 0, code, "%s\n%s", out, errOut)
			require.Contains(t, out, "released")
			done := waitJobStatus(t, d, a, "COMPLETED", time.Minute)
			require.Equal(t, job.ID, done.ID)
			require.Zero(t, total(s.pgLeft(t, a)))
			out, _, code = d.CLI("tenant", "holds", "--include-released", "--format", "json")
			require.Equal(t, 0, code)
			var holds struct {
				Holds []struct {
					TenantID      string  `json:"tenant_id"`
					ReleasedAt    *string `json:"released_at"`
					HeldByUID     *int64  `json:"held_by_uid"`
					ReleasedByUID *int64  `json:"released_by_uid"`
				} `json:"holds"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &holds))
			require.Len(t, holds.Holds, 1)
			require.NotNil(t, holds.Holds[0].ReleasedAt)
			require.NotNil(t, holds.Holds[0].HeldByUID, "who held it")
			require.NotNil(t, holds.Holds[0].ReleasedByUID, "who released it")
		})
	}
}

// A deleter whose plugin refuses its config (here: a foreign key cycle no
// delete order satisfies) can never run: the job is BLOCKED with the
// plugin's reason, not PARTIAL and retried forever, and `tenant delete
// --wait` returns.
func TestAJobWhoseDeleterRefusesItsConfigIsBlockedWithTheReason(t *testing.T) {
	t.Parallel()
	dsn := testsvc.PGDatabase(t)
	pool, err := pgxpool.New(testsvc.Context(t, time.Minute), dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(testsvc.Context(t, time.Minute), `
CREATE TABLE store (store_id int PRIMARY KEY, tenant_id text NOT NULL, manager_staff_id int NOT NULL);
CREATE TABLE staff (staff_id int PRIMARY KEY, tenant_id text NOT NULL, store_id int NOT NULL CONSTRAINT fk_staff_store REFERENCES store);
ALTER TABLE store ADD CONSTRAINT fk_store_staff FOREIGN KEY (manager_staff_id) REFERENCES staff;`)
	require.NoError(t, err)
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Extra: fmt.Sprintf(`
[deletion]
retry_initial_delay = "200ms"
retry_max_delay = "1s"
poll_interval = "100ms"

[[deleter]]
name = "postgres:sakila"
plugin = "postgres"
[deleter.config]
dsn = %q
discover = true
`, dsn)})
	tenant := uuid.NewString()
	out, errOut, code := d.CLIWithin(time.Minute, "tenant", "delete", tenant, "--yes", "--wait")
	require.NotEqual(t, 0, code, "%s\n%s", out, errOut)
	job := waitJob(t, d, tenant, "BLOCKED", 30*time.Second)
	require.Contains(t, job.LastError, "fk_store_staff", "the plugin's reason is the job's")
	require.Contains(t, out+errOut, "BLOCKED")
}
