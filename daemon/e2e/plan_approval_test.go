package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/e2e/apitest"
	"github.com/lifecycled/lifecycled/daemon/wire"
	"github.com/lifecycled/lifecycled/internal/testsvc"
)

// planJob is what these tests read of a job.
type planJob struct {
	ID               string `json:"id"`
	Status           string `json:"status"`
	PlanHash         string `json:"plan_hash"`
	PlanDrift        string `json:"plan_drift"`
	LastError        string `json:"last_error"`
	RequestedByUID   *int64 `json:"requested_by_uid"`
	ApprovedByUID    *int64 `json:"approved_by_uid"`
	ApprovalRequired bool   `json:"approval_required"`
	Verified         bool   `json:"verified"`
}

type planView struct {
	PlanHash *string `json:"plan_hash"`
	Complete bool    `json:"complete"`
	Deleters []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
		Steps  []struct {
			Target   string `json:"target"`
			Via      string `json:"via"`
			Expected int64  `json:"expected"`
		} `json:"steps"`
	} `json:"deleters"`
}

// pgTableChecksum hashes every row of a tenant in each table, so that a
// bystander's rows can be compared byte for byte before and after.
func (s *stores) pgTableChecksum(t *testing.T, tenant string, tables ...string) string {
	ctx := testsvc.Context(t, time.Minute)
	var parts []string
	for _, table := range tables {
		var sum string
		require.NoError(t, s.pg.QueryRow(ctx, "SELECT coalesce(md5(string_agg(t::text, ',' ORDER BY t.id)), '') FROM "+table+
			" t WHERE tenant_id = $1", tenant).Scan(&sum))
		parts = append(parts, table+"="+sum)
	}
	h := sha256.Sum256([]byte(strings.Join(parts, "|")))
	return hex.EncodeToString(h[:])
}

func (s *stores) pgCount(t *testing.T, tenant string, tables ...string) int64 {
	ctx := testsvc.Context(t, time.Minute)
	var n int64
	for _, table := range tables {
		var c int64
		require.NoError(t, s.pg.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE tenant_id = $1", tenant).Scan(&c))
		n += c
	}
	return n
}

// cliAs runs the lifecycled CLI as another user, as a second operator.
func cliAs(t *testing.T, d *testsvc.Daemon, uid uint32, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(d.Bin, "lifecycled"), append([]string{"--addr", "unix://" + d.Socket}, args...)...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run cli as uid %d: %v", uid, err)
	}
	return out.String(), code
}

const nobody = 65534

var workflowTables = []string{"workflow_steps", "workflow_instances", "workflow_definitions"}

// TestPlanDriftAndTwoPersonApprovalOnRealPostgres is issue 16's case
// against a real PostgreSQL and the real postgres plugin (FK discovery):
// one operator reads the plan and asks for the erasure with its hash; the
// same uid cannot approve it; a second operator (another uid) approves;
// before the job starts a migration adds a table with the tenant column.
// The job refuses at start, naming the table, and deletes nothing; the
// new plan is approved and the tenant is erased from every table, the new
// one included, while the bystander's rows stay byte for byte as they were.
// The receipt names both operators and the plan.
func TestPlanDriftAndTwoPersonApprovalOnRealPostgres(t *testing.T) {
	testsvc.Need(t, os.Getuid() == 0, "needs root to approve as another user (the two-person rule)")
	for name, state := range stateStores(t) {
		t.Run(name, func(t *testing.T) {
			s := newPGStore(t)
			ctx := testsvc.Context(t, 3*time.Minute)
			a, b := uuid.NewString(), uuid.NewString()
			s.seed(t, a, 60)
			s.seed(t, b, 40)
			d := testsvc.StartDaemon(t, testsvc.DaemonOptions{State: state(), Extra: fmt.Sprintf(`
[deletion]
concurrency = 2
retry_initial_delay = "300ms"
retry_max_delay = "2s"
poll_interval = "100ms"
lease = "3s"
require_approval = true
approvers_distinct = true

[[deleter]]
name = "postgres:app"
plugin = "postgres"
[deleter.config]
dsn = %q
discover = true
tenant_column = "tenant_id"
`, s.pgDSN)})
			testsvc.Eventually(t, time.Minute, apitest.Ready(d), "plugins ready")
			// The second operator reaches the socket through its group.
			require.NoError(t, os.Chmod(d.Dir, 0o755))
			require.NoError(t, os.Chown(d.Socket, 0, nobody))

			out, errOut, code := d.CLI("--format", "json", "tenant", "plan", a)
			require.Equal(t, 0, code, "%s\n%s", out, errOut)
			var plan planView
			require.NoError(t, json.Unmarshal([]byte(out), &plan))
			require.True(t, plan.Complete)
			require.Len(t, plan.Deleters, 1)
			require.Equal(t, "planned", plan.Deleters[0].Status)
			var expected int64
			for _, st := range plan.Deleters[0].Steps {
				expected += st.Expected
			}
			require.Equal(t, s.pgCount(t, a, workflowTables...), expected, "the plan's counts are the rows")
			hash := *plan.PlanHash

			out, errOut, code = d.CLI("tenant", "delete", a, "--yes", "--plan-hash", hash, "--not-before", "4s")
			require.Equal(t, 0, code, "%s\n%s", out, errOut)
			require.Contains(t, out, "AWAITING_APPROVAL")
			var job planJob
			apitest.Expect(t, d, 200, &job).Deletion(t.Context(), a)
			require.Equal(t, "AWAITING_APPROVAL", job.Status)
			require.Equal(t, int64(0), *job.RequestedByUID)

			// The requester cannot approve their own request.
			out, errOut, code = d.CLI("tenant", "approve", a, "--plan-hash", hash)
			require.Equal(t, 2, code, "%s\n%s", out, errOut)
			require.Contains(t, errOut, "SYS_TENANT_APPROVER_NOT_DISTINCT")
			out, code = cliAs(t, d, nobody, "tenant", "approve", a, "--plan-hash", hash)
			require.Equal(t, 0, code, out)
			require.Contains(t, out, "approved by uid 65534 (requested by uid 0)")

			// A migration adds a table with the tenant column before the
			// job's not_before.
			for _, q := range []struct {
				sql  string
				args []any
			}{
				{`CREATE TABLE invoices (id bigserial PRIMARY KEY, tenant_id uuid NOT NULL, amount int)`, nil},
				{`INSERT INTO invoices (tenant_id, amount) SELECT $1::uuid, g FROM generate_series(1, 7) g`, []any{a}},
				{`INSERT INTO invoices (tenant_id, amount) SELECT $1::uuid, g FROM generate_series(1, 5) g`, []any{b}},
			} {
				_, err := s.pg.Exec(ctx, q.sql, q.args...)
				require.NoError(t, err)
			}
			all := append([]string{"invoices"}, workflowTables...)
			sumB, sumA, countA := s.pgTableChecksum(t, b, all...), s.pgTableChecksum(t, a, all...), s.pgCount(t, a, all...)

			testsvc.Eventually(t, time.Minute, func() bool {
				apitest.Expect(t, d, 200, &job).Deletion(t.Context(), a)
				return job.Status == "AWAITING_APPROVAL" && job.PlanDrift != ""
			}, "the job refuses at start (is %s)", job.Status)
			require.Contains(t, job.PlanDrift, "invoices", "the refusal names the new table")
			require.Contains(t, job.PlanDrift, "new target")
			require.Equal(t, hash, job.PlanHash)
			require.Equal(t, sumA, s.pgTableChecksum(t, a, all...), "nothing of the tenant was deleted")
			require.Equal(t, countA, s.pgCount(t, a, all...))
			require.Equal(t, sumB, s.pgTableChecksum(t, b, all...), "the bystander is untouched")
			require.Contains(t, d.Logs(), "deletion job refused: its plan changed")

			// The stale hash is refused; the new plan is read and approved.
			out, code = cliAs(t, d, nobody, "tenant", "approve", a, "--plan-hash", hash)
			require.Equal(t, 2, code, out)
			require.Contains(t, out, "SYS_TENANT_PLAN_CHANGED")
			out, errOut, code = d.CLI("--format", "json", "tenant", "plan", a)
			require.Equal(t, 0, code, "%s\n%s", out, errOut)
			require.NoError(t, json.Unmarshal([]byte(out), &plan))
			require.NotEqual(t, hash, *plan.PlanHash)
			out, code = cliAs(t, d, nobody, "tenant", "approve", a, "--plan-hash", *plan.PlanHash)
			require.Equal(t, 0, code, out)

			testsvc.Eventually(t, 2*time.Minute, func() bool {
				apitest.Expect(t, d, 200, &job).Deletion(t.Context(), a)
				return job.Status == "COMPLETED"
			}, "the job completes (is %s: %s)", job.Status, job.LastError)
			require.True(t, job.Verified)
			require.Equal(t, int64(0), s.pgCount(t, a, all...), "every row of the tenant is gone, the new table's too")
			require.Equal(t, sumB, s.pgTableChecksum(t, b, all...), "the bystander is untouched")

			var rec struct {
				RequestedByUID *int64  `json:"requested_by_uid"`
				PlanHash       *string `json:"plan_hash"`
				Approval       struct {
					Required      bool   `json:"required"`
					ApprovedByUID *int64 `json:"approved_by_uid"`
				} `json:"approval"`
			}
			raw, _ := apitest.Expect(t, d, 200, &rec).Receipt(t.Context(), a)
			require.Equal(t, int64(0), *rec.RequestedByUID)
			require.Equal(t, int64(nobody), *rec.Approval.ApprovedByUID)
			require.True(t, rec.Approval.Required)
			require.Equal(t, *plan.PlanHash, *rec.PlanHash)
			path := filepath.Join(t.TempDir(), "r.json")
			require.NoError(t, os.WriteFile(path, raw, 0o600))
			out, errOut, code = d.CLI("receipt", "verify", path)
			require.Equal(t, 0, code, "%s\n%s", out, errOut)
		})
	}
}

// TestUnlistedTableStopsAJobOnRealPostgres: with an explicit tables list,
// a table added between the request and the start with the tenant column
// makes the postgres plugin refuse to plan (its drift gate); the job stops
// before deleting anything, naming the table, without require_approval
// configured; after the operator lists the table (a reload) and approves
// the new plan, the tenant is erased everywhere and the bystander is not.
func TestUnlistedTableStopsAJobOnRealPostgres(t *testing.T) {
	s := newPGStore(t)
	ctx := testsvc.Context(t, 3*time.Minute)
	a, b := uuid.NewString(), uuid.NewString()
	s.seed(t, a, 50)
	s.seed(t, b, 30)
	d := testsvc.StartDaemon(t, testsvc.DaemonOptions{Extra: s.pgOnly("")})
	testsvc.Eventually(t, time.Minute, apitest.Ready(d), "plugins ready")
	var plan planView
	apitest.Expect(t, d, 200, &plan).Plan(t.Context(), a)
	require.True(t, plan.Complete)
	var job planJob
	apitest.Expect(t, d, 202, &job).RequestDeletion(t.Context(), a, &wire.DeletionRequest{PlanHash: plan.PlanHash,
		NotBefore: new(time.Now().Add(3 * time.Second).UTC().Format(time.RFC3339Nano))})
	require.Equal(t, "SCHEDULED", job.Status)
	require.Equal(t, *plan.PlanHash, job.PlanHash)

	_, err := s.pg.Exec(ctx, `CREATE TABLE invoices (id bigserial PRIMARY KEY, tenant_id uuid NOT NULL, amount int)`)
	require.NoError(t, err)
	for tenant, n := range map[string]int{a: 6, b: 4} {
		_, err = s.pg.Exec(ctx, `INSERT INTO invoices (tenant_id, amount) SELECT $1::uuid, g FROM generate_series(1, $2) g`, tenant, n)
		require.NoError(t, err)
	}
	all := append([]string{"invoices"}, workflowTables...)
	sumA, sumB := s.pgTableChecksum(t, a, all...), s.pgTableChecksum(t, b, all...)

	testsvc.Eventually(t, time.Minute, func() bool {
		apitest.Expect(t, d, 200, &job).Deletion(t.Context(), a)
		return job.Status == "AWAITING_APPROVAL"
	}, "the job stops at start (is %s: %s)", job.Status, job.LastError)
	require.Contains(t, job.PlanDrift, "postgres:workflows refused to plan")
	require.Contains(t, job.PlanDrift, "invoices", "the refusal names the new table")
	require.False(t, job.ApprovalRequired)
	require.Equal(t, sumA, s.pgTableChecksum(t, a, all...), "nothing of the tenant was deleted")
	require.Equal(t, sumB, s.pgTableChecksum(t, b, all...), "the bystander is untouched")

	// The operator lists the new table and approves the plan it gives.
	cfg, err := os.ReadFile(d.ConfigPath)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(d.ConfigPath, []byte(strings.Replace(string(cfg),
		`tables = ["workflow_steps", "workflow_instances", "workflow_definitions"]`,
		`tables = ["invoices", "workflow_steps", "workflow_instances", "workflow_definitions"]`, 1)), 0o600))
	out, errOut, code := d.CLI("reload")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	testsvc.Eventually(t, time.Minute, func() bool {
		var got apitest.Answer
		apitest.Record(d, &got).Plan(t.Context(), a)
		return got.Code == 200 && json.Unmarshal(got.Body, &plan) == nil && plan.Complete
	}, "the plan is complete again")
	require.Contains(t, fmt.Sprint(plan.Deleters[0].Steps), "invoices")
	apitest.Expect(t, d, 200, &job).Approve(t.Context(), a, wire.ApproveRequest{PlanHash: plan.PlanHash})
	testsvc.Eventually(t, 2*time.Minute, func() bool {
		apitest.Expect(t, d, 200, &job).Deletion(t.Context(), a)
		return job.Status == "COMPLETED"
	}, "the job completes (is %s: %s)", job.Status, job.LastError)
	require.Equal(t, int64(0), s.pgCount(t, a, all...))
	require.Equal(t, sumB, s.pgTableChecksum(t, b, all...), "the bystander is untouched")
}
